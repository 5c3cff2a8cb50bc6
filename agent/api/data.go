package api

import (
	"errors"
	"slices"
	"sync"

	"github.com/valyala/fasthttp"

	"peerdns/agent/query"
	"peerdns/agent/store"
	"peerdns/http/httpx"
)

func getter(ctx *fasthttp.RequestCtx) query.Getter {
	return func(k string) (string, bool) {
		if slices.Contains(query.DimensionArgs, k) {
			return argJoined(ctx, k)
		}
		return arg(ctx, k)
	}
}

// argJoined is every value of a repeated argument joined by '|'.
func argJoined(ctx *fasthttp.RequestCtx, key string) (string, bool) {
	vs := ctx.QueryArgs().PeekMulti(key)
	if len(vs) == 0 {
		return "", false
	}
	var b []byte
	for _, v := range vs {
		if len(v) == 0 {
			continue
		}
		if len(b) > 0 {
			b = append(b, '|')
		}
		b = append(b, v...)
	}
	return string(b), true
}

// runQuery reads the windows the request needs from the store and
// computes the result. defs are the charts (one for a chart query, every
// chart of the context for a context query); the reads are counted for r
// (netdata.queries).
func (s *Server) runQuery(r store.Reader, req *query.Request, defs []*store.ChartDef, now int64) (*query.Result, int64, error) {
	series := make([]query.Series, len(defs))
	var last int64
	for i, d := range defs {
		series[i].Chart = d
		if t, vals, ok := s.o.DB.Latest(d.ID); ok {
			series[i].Latest = vals
			last = max(last, t)
		}
	}
	step := int64(1)
	if req.Tier == 1 {
		step = 60
	}
	unaligned := req.Options&query.OptUnaligned != 0
	plan, err := query.NewPlan(req.After, req.Before, req.Points, unaligned, now, 0, last, step)
	if err != nil {
		return nil, last, httpx.BadRequest("%v", err)
	}
	if plan.Points > 0 {
		// The store copies every slot of every dimension of the window:
		// refuse copies beyond maxQueryCells (32 bytes each) instead of
		// letting one request allocate hundreds of megabytes.
		// The store clamps windows to what it holds, so count from the
		// oldest stored point of the tier.
		st := s.stats()
		oldest := st.FirstTime
		if req.Tier == 1 {
			oldest = st.Tier1First
		}
		cells := int64(0)
		span := (max(plan.Before, last)-max(plan.After, oldest))/step + 1
		for _, d := range defs {
			cells += span * int64(len(d.Dims))
		}
		if cells > maxQueryCells {
			return nil, last, httpx.BadRequest("query too large: %d stored points (at most %d); use a shorter window, tier=1 or fewer charts", cells, maxQueryCells)
		}
		for i, d := range defs {
			// Up to the newest point: before is clamped to it in the plan.
			w, err := s.o.DB.QueryFor(r, d.ID, req.Tier, plan.After, max(plan.Before, last)+step-1)
			if err != nil {
				if errors.Is(err, store.ErrNotFound) {
					continue // removed meanwhile: no data
				}
				if errors.Is(err, store.ErrBadTier) {
					return nil, last, httpx.BadRequest("%v", err)
				}
				return nil, last, httpx.Internal("query %s: %v", d.ID, err)
			}
			// A window that starts before the stored data keeps its after:
			// the rows before the first point are null, as Netdata pads
			// them (its load_defaults capture), instead of spreading the
			// points over the data.
			series[i].Window = w
		}
	}
	res, err := query.Run(req, plan, series)
	if errors.Is(err, query.ErrNoMetrics) {
		return nil, last, httpx.Errorf(fasthttp.StatusNotFound, "%s", query.MsgNoMetrics)
	}
	if tooLarge := (*query.TooLargeError)(nil); errors.As(err, &tooLarge) {
		return nil, last, httpx.BadRequest("%v", err)
	}
	return res, last, err
}

// maxQueryCells caps the slots one data query copies out of the store
// (4M slots = 128 MiB of store.Agg).
const maxQueryCells = 4 << 20

// resolveDefs finds the charts of a request: the chart, or every chart of
// the context (optionally only the named chart of it).
func (s *Server) resolveDefs(req *query.Request) ([]*store.ChartDef, bool, error) {
	if req.Context != "" {
		all := s.index2().byContext[req.Context]
		if req.Chart != "" {
			var one []*store.ChartDef
			for _, c := range all {
				if c.ID == req.Chart || c.Name == req.Chart {
					one = append(one, c)
				}
			}
			all = one
		}
		if len(all) == 0 {
			return nil, true, httpx.Errorf(fasthttp.StatusNotFound, "%s", query.MsgNoMetrics)
		}
		return all, true, nil
	}
	if req.Chart == "" {
		return nil, false, httpx.BadRequest("No chart or context is given.")
	}
	c, ok := s.o.DB.Chart(req.Chart)
	if !ok {
		return nil, false, httpx.Errorf(fasthttp.StatusNotFound, "%s", query.MsgNoMetrics)
	}
	return []*store.ChartDef{c}, false, nil
}

func (s *Server) data(ctx *fasthttp.RequestCtx, ver int) error {
	if ver >= 2 {
		return s.dataV2(ctx, ver)
	}
	s.counters.data.Add(1)
	req, err := query.ParseRequest(getter(ctx))
	if err != nil {
		return httpx.BadRequest("%v", err)
	}
	defs, isContext, err := s.resolveDefs(&req)
	if err != nil {
		return err
	}
	// Answers are a function of the query, the current second and the
	// newest point of each chart: a dashboard polled by many viewers (or a
	// benchmark) costs one query per chart per second.
	now := s.now().Unix()
	// Prune and retention.set bump the store's generation: their effect
	// shows at once, not at the next second.
	sig := int64(s.o.DB.Generation()) << 40
	for _, d := range defs {
		sig += s.chartLast(d.ID)
	}
	key := ctx.URI().RequestURI()
	if ct, body, ok := s.dataCache.get(key, now, sig); ok {
		setBody(ctx, ct, body)
		return nil
	}
	res, last, err := s.runQuery(store.ReadData, &req, defs, now)
	if err != nil {
		return err
	}
	w := &query.Wrap{
		Host: s.host.Hostname, API: 1, UpdateEvery: max(defs[0].UpdateEvery, 1),
		FirstEntry: s.stats().FirstTime, LastEntry: last, Context: isContext,
	}
	if ver > 1 {
		w.API = ver
	}
	buf := getBuf()
	*buf = res.Append(*buf, w)
	setBody(ctx, res.ContentType(), *buf)
	s.dataCache.put(key, now, sig, res.ContentType(), *buf)
	putBuf(buf)
	return nil
}

// respCache keeps the data answers of the current second. It is emptied
// when the second changes, holds at most maxEntries answers of at most
// maxBody bytes, and is keyed by the request URI plus a signature of the
// data (the sum of the charts' newest point times).
type respCache struct {
	mu  sync.Mutex
	sec int64
	m   map[string]cachedResp
}

type cachedResp struct {
	sig  int64
	ct   string
	body []byte
}

const (
	respCacheEntries = 256
	respCacheMaxBody = 256 << 10
)

func (c *respCache) get(key []byte, sec, sig int64) (string, []byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sec != sec {
		return "", nil, false
	}
	e, ok := c.m[string(key)]
	if !ok || e.sig != sig {
		return "", nil, false
	}
	return e.ct, e.body, true
}

func (c *respCache) put(key []byte, sec, sig int64, ct string, body []byte) {
	if len(body) > respCacheMaxBody {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sec != sec || c.m == nil {
		c.sec = sec
		c.m = make(map[string]cachedResp, 16)
	}
	if len(c.m) >= respCacheEntries {
		return
	}
	c.m[string(key)] = cachedResp{sig: sig, ct: ct, body: append([]byte(nil), body...)}
}
