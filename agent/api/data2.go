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

// v2Nodes is the node list a v2 query selects from, with each node's
// store: this agent, then (in parent mode, when the fleet lends its
// stores) every child, so one query can cover and group several nodes.
func (s *Server) v2Nodes() ([]query.V2Node, []*store.DB) {
	nodes := []query.V2Node{{GUID: s.host.GUID, NodeID: s.host.NodeID, Hostname: s.host.Hostname}}
	dbs := []*store.DB{s.o.DB}
	if fs, ok := s.o.Fleet.(FleetStores); ok {
		for _, c := range s.children() {
			if db, ok := fs.ChildDB(c.PublicKey); ok {
				nodes = append(nodes, query.V2Node{GUID: c.GUID, NodeID: c.NodeID, Hostname: c.Hostname})
				dbs = append(dbs, db)
			}
		}
	}
	return nodes, dbs
}

// v2Instances lists every chart of every node as a v2 instance with its
// labels and (this agent's) alerts.
func (s *Server) v2Instances(alerts []health.Alert, dbs []*store.DB) []query.V2Instance {
	ix := s.index2()
	byChart := map[string][]query.InstanceAlert{}
	for _, a := range alerts {
		byChart[a.Chart] = append(byChart[a.Chart], query.InstanceAlert{Name: a.Name, Status: string(a.Status)})
	}
	out := make([]query.V2Instance, 0, len(ix.charts))
	for _, c := range ix.charts {
		out = append(out, query.V2Instance{Chart: c, Labels: instanceLabels(c), Alerts: byChart[c.ID]})
	}
	for n, db := range dbs[1:] {
		for _, c := range db.Charts() {
			out = append(out, query.V2Instance{Node: n + 1, Chart: c, Labels: instanceLabels(c)})
		}
	}
	return out
}

func chartLastIn(db *store.DB, id string) int64 {
	t, _, ok := db.Latest(id)
	if !ok {
		return 0
	}
	return t
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
	nodes, dbs := s.v2Nodes()
	t := query.SelectV2(&req, nodes, s.v2Instances(alerts, dbs))
	var last int64
	need := make([]bool, len(t.Instances))
	for i := range t.Instances {
		if need[i] = t.NeedsWindow(i); need[i] {
			last = max(last, chartLastIn(dbs[t.Instances[i].Node], t.Instances[i].Chart.ID))
		}
	}
	st := s.stats()
	if !req.TierSet && last > 0 && st.FirstTime > 0 && st.Tier1First > 0 {
		// Netdata picks the tier that holds the window: a window that
		// tier 0 misses more than a tenth of (it starts that much before
		// tier 0's oldest point) is read from tier 1, if tier 1 holds
		// older data than tier 0.
		// The window as the plan reads it (relative values of either sign).
		after, before := query.ResolveWindow(req.After, req.Before, now, last)
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
			db := dbs[t.Instances[i].Node]
			err := db.QueryIntoFor(store.ReadData, w, t.Instances[i].Chart.ID, req.Tier, plan.After, max(plan.Before, last)+step-1)
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
	if tooLarge := (*query.TooLargeError)(nil); errors.As(err, &tooLarge) {
		return httpx.BadRequest("%v", err)
	}
	if err != nil {
		return httpx.Internal("query: %v", err)
	}
	executed := time.Now()
	tiers := [2]query.TierInfo{{UpdateEvery: 1, First: st.FirstTime, Last: st.LastTime}, {UpdateEvery: 60, First: st.Tier1First, Last: st.Tier1Last}}
	meta := &query.V2Meta{
		API: ver, Agent: nodes[0], Now: now, Versions: s.versionHashes(), Tiers: tiers,
		Received: received, Prepared: prepared, Executed: executed,
	}
	buf := getBuf()
	ct := "application/json; charset=utf-8"
	switch {
	case req.JSON2:
		*buf = res.AppendJSON2(*buf, meta, nil)
	default:
		v1 := res.AsV1(req.Format, req.Callback, req.TQX)
		// Every format is the result member of the v2 wrapper, as Netdata
		// writes every format of a v2 query (its v2 data always sets
		// jsonwrap); jsonp and datasource call a function with that.
		switch req.Format {
		case query.FormatJSONP, query.FormatDatasource:
			*buf = res.AppendCall(*buf, meta, v1)
			ct = v1.Request.Format.ContentType()
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
