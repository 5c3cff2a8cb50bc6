package api

import (
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/health"
	"peerdns/agent/query"
	"peerdns/agent/store"
	"peerdns/http/httpx"
)

// instanceLabels are the labels a chart carries in v2 answers and label
// selectors: the collecting plugin and module, as Netdata labels every
// chart ("[none]" for a chart without a module, as v1's chart_labels).
func instanceLabels(c *store.ChartDef) []query.Label {
	mod := c.Module
	if mod == "" {
		mod = "[none]"
	}
	return []query.Label{{Key: "_collect_plugin", Value: c.Plugin}, {Key: "_collect_module", Value: mod}}
}

// v2Nodes is the node list a v2 query selects from: this agent. (A
// parent hands a query naming one child to that child's server before it
// gets here; one query over several nodes at once is not served.)
func (s *Server) v2Nodes() []query.V2Node {
	return []query.V2Node{{GUID: s.host.GUID, NodeID: s.host.NodeID, Hostname: s.host.Hostname}}
}

// v2Instances lists every chart as a v2 instance with its labels and
// alerts.
func (s *Server) v2Instances(alerts []health.Alert) []query.V2Instance {
	ix := s.index2()
	byChart := map[string][]query.InstanceAlert{}
	for _, a := range alerts {
		byChart[a.Chart] = append(byChart[a.Chart], query.InstanceAlert{Name: a.Name, Status: string(a.Status)})
	}
	out := make([]query.V2Instance, len(ix.charts))
	for i, c := range ix.charts {
		out[i] = query.V2Instance{Chart: c, Labels: instanceLabels(c), Alerts: byChart[c.ID]}
	}
	return out
}

func (s *Server) versionHashes() query.Versions {
	var alertsSoft int64
	for _, a := range s.alerts() {
		alertsSoft = max(alertsSoft, a.LastUpdated)
	}
	ix := s.index2()
	ix.hashOnce.Do(func() { ix.hash = chartsHash(ix.charts) })
	guids := []*v2Node{{MachineGUID: s.host.GUID}}
	for _, c := range s.children() {
		guids = append(guids, &v2Node{MachineGUID: c.GUID})
	}
	return query.Versions{
		NodesHard:    nodesHash(guids),
		ContextsHard: ix.hash,
		ContextsSoft: uint64(s.stats().LastTime),
		AlertsHard:   s.latestUniqueID(),
		AlertsSoft:   uint64(alertsSoft),
	}
}

// dataV2 answers /api/v2/data and /api/v3/data with Netdata's v2 query
// model (see the package doc: selectors, grouping, limits).
func (s *Server) dataV2(ctx *fasthttp.RequestCtx, ver int) error {
	received := time.Now()
	s.counters.data.Add(1)
	req, err := query.ParseV2Request(getter(ctx))
	if err != nil {
		return httpx.BadRequest("%v", err)
	}
	deadline := received.Add(req.Timeout)
	now := s.now().Unix()
	sig := int64(s.o.DB.Generation())<<40 + s.stats().LastTime
	key := ctx.URI().RequestURI()
	if ct, body, ok := s.dataCache.get(key, now, sig); ok {
		setBody(ctx, ct, body)
		return nil
	}
	alerts := s.alerts()
	t := query.SelectV2(&req, s.v2Nodes(), s.v2Instances(alerts))
	var last int64
	need := make([]bool, len(t.Instances))
	for i := range t.Instances {
		if need[i] = t.NeedsWindow(i); need[i] {
			last = max(last, s.chartLast(t.Instances[i].Chart.ID))
		}
	}
	st := s.stats()
	if !req.TierSet && last > 0 && st.FirstTime > 0 && st.Tier1First > 0 {
		// Netdata picks the tier that holds the window: a window that
		// tier 0 misses more than a tenth of (it starts that much before
		// tier 0's oldest point) is read from tier 1, if tier 1 holds
		// older data than tier 0.
		after, before := req.After, req.Before
		if before <= 0 && before >= -query.RelativeMax {
			before = min(now, last) + before
		}
		if after <= 0 && after >= -query.RelativeMax {
			after = before + after
		}
		if span := before - after; span > 0 && st.FirstTime-after > span/10 && st.Tier1First < st.FirstTime {
			req.Tier = 1
		}
	}
	step := int64(1)
	if req.Tier == 1 {
		step = 60
	}
	plan, err := query.NewV2Plan(&req, now, last, step)
	if err != nil {
		return httpx.BadRequest("%v", err)
	}
	if plan.Points > 0 {
		oldest := st.FirstTime
		if req.Tier == 1 {
			oldest = st.Tier1First
		}
		span := (max(plan.Before, last)-max(plan.After, oldest))/step + 1
		cells := int64(0)
		for i := range t.Instances {
			if need[i] {
				cells += span * int64(len(t.Instances[i].Chart.Dims))
			}
		}
		if cells > maxQueryCells {
			return httpx.BadRequest("query too large: %d stored points (at most %d); use a shorter window, tier=1 or narrower selectors", cells, maxQueryCells)
		}
		// Read one instance's window at a time, as RunV2 gets to it, into
		// one window reused from instance to instance: a query over many
		// charts holds and allocates one chart's stored points.
		w := &store.Window{}
		t.Load = func(i int) (*store.Window, error) {
			err := s.o.DB.QueryIntoFor(store.ReadData, w, t.Instances[i].Chart.ID, req.Tier, plan.After, max(plan.Before, last)+step-1)
			if errors.Is(err, store.ErrNotFound) {
				return nil, nil // removed meanwhile: no data
			}
			if err != nil {
				return nil, err
			}
			return w, nil
		}
	}
	prepared := time.Now()
	res, err := query.RunV2(t, plan, deadline)
	if errors.Is(err, query.ErrTimeout) {
		return v2Timeout(req)
	}
	if err != nil {
		return httpx.Internal("query: %v", err)
	}
	executed := time.Now()
	tiers := [2]query.TierInfo{{UpdateEvery: 1, First: st.FirstTime, Last: st.LastTime}, {UpdateEvery: 60, First: st.Tier1First, Last: st.Tier1Last}}
	meta := &query.V2Meta{
		API: ver, Agent: s.v2Nodes()[0], Now: now, Versions: s.versionHashes(), Tiers: tiers,
		Received: received, Prepared: prepared, Executed: executed,
	}
	buf := getBuf()
	ct := "application/json; charset=utf-8"
	switch {
	case req.JSON2:
		*buf = res.AppendJSON2(*buf, meta, nil)
	default:
		v1 := res.AsV1(req.Format, req.Callback, req.TQX)
		// jsonp and datasource call a function with the answer; the other
		// formats are the result member of the v2 wrapper, as Netdata
		// writes every format of a v2 query.
		switch req.Format {
		case query.FormatJSONP, query.FormatDatasource:
			v1.Request.Options &^= query.OptJSONWrap
			*buf = v1.Append(*buf, nil)
			ct = v1.ContentType()
		default:
			*buf = res.AppendJSON2(*buf, meta, v1)
		}
	}
	setBody(ctx, ct, *buf)
	// The timings differ per answer, but a second's answers to one URL
	// are the same data: dashboards polled by many viewers share them.
	s.dataCache.put(key, now, sig, ct, *buf)
	putBuf(buf)
	return nil
}

// v2Timeout is Netdata's answer to a query past its time budget.
func v2Timeout(req query.V2Request) error {
	return httpx.Errorf(fasthttp.StatusGatewayTimeout, "Query timeout: the query ran longer than its %d ms budget (timeout=)", req.Timeout.Milliseconds())
}
