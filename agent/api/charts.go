package api

import (
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"

	"peerdns/agent/health"
	"peerdns/agent/store"
	"peerdns/http/httpx"
)

// contextIndex groups the published chart list by context. It is rebuilt
// when the store publishes a new list (charts registered or replaced).
type contextIndex struct {
	charts    []*store.ChartDef
	byContext map[string][]*store.ChartDef
	contexts  []string // in chart order (priority, id)
	hashOnce  sync.Once
	hash      uint64 // chartsHash(charts), computed on first use
}

func (s *Server) index2() *contextIndex {
	charts := s.o.DB.Charts()
	if ix := s.ctxIndex.Load(); ix != nil && sameSlice(ix.charts, charts) {
		return ix
	}
	ix := &contextIndex{charts: charts, byContext: map[string][]*store.ChartDef{}}
	for _, c := range charts {
		if _, ok := ix.byContext[c.Context]; !ok {
			ix.contexts = append(ix.contexts, c.Context)
		}
		ix.byContext[c.Context] = append(ix.byContext[c.Context], c)
	}
	s.ctxIndex.Store(ix)
	return ix
}

func sameSlice(a, b []*store.ChartDef) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0]
}

func (s *Server) chartLast(id string) int64 {
	t, _, ok := s.o.DB.Latest(id)
	if !ok {
		return 0
	}
	return t
}

// chartJSON is Netdata's chart object (/api/v1/chart, and each entry of
// /api/v1/charts), keys in Netdata's order.
type chartJSON struct {
	ID             string             `json:"id"`
	Name           string             `json:"name"`
	Type           string             `json:"type"`
	Family         string             `json:"family"`
	Context        string             `json:"context"`
	Title          string             `json:"title"`
	Priority       int                `json:"priority"`
	Plugin         string             `json:"plugin"`
	Module         string             `json:"module"`
	Units          string             `json:"units"`
	DataURL        string             `json:"data_url"`
	ChartType      string             `json:"chart_type"`
	Duration       int64              `json:"duration"`
	FirstEntry     int64              `json:"first_entry"`
	LastEntry      int64              `json:"last_entry"`
	UpdateEvery    int                `json:"update_every"`
	Dimensions     object[dimName]    `json:"dimensions"`
	ChartVariables struct{}           `json:"chart_variables"`
	Green          nullFloat          `json:"green"`
	Red            nullFloat          `json:"red"`
	Alarms         object[chartAlarm] `json:"alarms"`
	ChartLabels    chartLabels        `json:"chart_labels"`
	Functions      struct{}           `json:"functions"`
}

type dimName struct {
	Name string `json:"name"`
}

type chartAlarm struct {
	ID          uint32 `json:"id"`
	Status      string `json:"status"`
	Units       string `json:"units"`
	UpdateEvery int    `json:"update_every"`
}

type chartLabels struct {
	Plugin string `json:"_collect_plugin"`
	Module string `json:"_collect_module"`
}

// dataURL is the data query of chart id, the id escaped: a chart id
// holds what its source named (net.<interface>, a child's charts), and
// '&', '+', '%' or '#' in it would make the URL ask for another chart.
// Ids of letters, digits, '.', '_' and '-' read as Netdata writes them.
func dataURL(id string) string { return "/api/v1/data?chart=" + url.QueryEscape(id) }

// chartObject builds Netdata's chart object for c.
func (s *Server) chartObject(c *store.ChartDef, alerts []health.Alert) *chartJSON {
	first := s.stats().FirstTime
	last := s.chartLast(c.ID)
	dur := int64(0)
	if last == 0 {
		first = 0
	} else {
		dur = last - first + 1
	}
	mod := c.Module
	if mod == "" {
		mod = "[none]"
	}
	j := &chartJSON{
		ID: c.ID, Name: c.Name, Type: c.Type, Family: c.Family, Context: c.Context,
		Title: c.Title + " (" + c.ID + ")", Priority: c.Priority, Plugin: c.Plugin, Module: c.Module,
		Units: c.Units, DataURL: dataURL(c.ID), ChartType: c.ChartType,
		Duration: dur, FirstEntry: first, LastEntry: last, UpdateEvery: max(c.UpdateEvery, 1),
		Dimensions: object[dimName]{}, Green: noValue, Red: noValue, Alarms: object[chartAlarm]{},
		ChartLabels: chartLabels{Plugin: c.Plugin, Module: mod},
	}
	for _, d := range c.Dims {
		if d.Hidden {
			continue // Netdata leaves hidden dimensions out of chart listings
		}
		j.Dimensions = append(j.Dimensions, member[dimName]{d.ID, dimName{d.Name}})
	}
	for _, a := range alerts {
		if a.Chart == c.ID {
			j.Alarms = append(j.Alarms, member[chartAlarm]{a.Name, chartAlarm{a.ID, string(a.Status), a.Units, a.UpdateEvery}})
		}
	}
	return j
}

func (s *Server) chart(ctx *fasthttp.RequestCtx, _ int) error {
	id, _ := arg(ctx, "chart")
	if id == "" {
		return httpx.BadRequest("No chart id is given at the request.")
	}
	c, ok := s.o.DB.Chart(id)
	if !ok {
		return httpx.Errorf(fasthttp.StatusNotFound, "Chart is not found: %s", trimArg(id))
	}
	return writeJSON(ctx, s.chartObject(c, s.alerts()))
}

// chartsJSON is Netdata's /api/v1/charts.
type chartsJSON struct {
	Hostname        string             `json:"hostname"`
	Version         string             `json:"version"`
	ReleaseChannel  string             `json:"release_channel"`
	OS              string             `json:"os"`
	Timezone        string             `json:"timezone"`
	UpdateEvery     int                `json:"update_every"`
	History         int64              `json:"history"`
	MemoryMode      string             `json:"memory_mode"`
	CustomInfo      string             `json:"custom_info"`
	Charts          object[*chartJSON] `json:"charts"`
	ChartsCount     int                `json:"charts_count"`
	DimensionsCount int                `json:"dimensions_count"`
	AlarmsCount     int                `json:"alarms_count"`
	RRDMemoryBytes  int64              `json:"rrd_memory_bytes"`
	HostsCount      int                `json:"hosts_count"`
	Hosts           []chartsHost       `json:"hosts"`
}

type chartsHost struct {
	Hostname string `json:"hostname"`
}

func (s *Server) charts(ctx *fasthttp.RequestCtx, _ int) error {
	charts := s.o.DB.Charts()
	alerts := s.alerts()
	st := s.stats()
	out := chartsJSON{
		Hostname: s.host.Hostname, Version: s.host.Version, ReleaseChannel: "stable",
		OS: strings.ToLower(s.host.KernelName), Timezone: s.host.Timezone, UpdateEvery: 1,
		History: int64(st.Tier0Retention.Seconds()), MemoryMode: "ram+tier1",
		Charts: make(object[*chartJSON], 0, len(charts)), ChartsCount: len(charts),
		AlarmsCount: len(alerts), RRDMemoryBytes: st.MemoryBytes,
		HostsCount: 1, Hosts: []chartsHost{{s.host.Hostname}},
	}
	for _, c := range charts {
		j := s.chartObject(c, alerts)
		out.Charts = append(out.Charts, member[*chartJSON]{c.ID, j})
		out.DimensionsCount += len(j.Dimensions)
	}
	return writeJSON(ctx, &out)
}

// contextObject is the Netdata v1 context object; full adds the charts.
func (s *Server) contextObject(name string, charts []*store.ChartDef, full bool) map[string]any {
	c0 := charts[0]
	st := s.stats()
	var last int64
	for _, c := range charts {
		last = max(last, s.chartLast(c.ID))
	}
	now := s.now().Unix()
	o := map[string]any{
		"title": c0.Title, "units": c0.Units, "family": c0.Family, "chart_type": c0.ChartType,
		"priority": c0.Priority, "first_time_t": st.FirstTime, "last_time_t": last,
		"collected": collectingAt(last, now),
	}
	if full {
		o["deleted"] = false
		o["flags"] = contextFlags(collectingAt(last, now))
		o["version"] = st.FirstTime
		cm := map[string]any{}
		for _, c := range charts {
			clast := s.chartLast(c.ID)
			dims := map[string]any{}
			for _, d := range c.Dims {
				dims[d.ID] = map[string]any{"uuid": uuidFrom([]byte(c.ID + "\x00" + d.ID)), "flags": contextFlags(collectingAt(clast, now)), "name": d.Name, "first_time_t": st.FirstTime, "last_time_t": clast,
					"collected": collectingAt(clast, now), "deleted": false, "hidden": d.Hidden}
			}
			cm[c.ID] = map[string]any{
				"uuid": uuidFrom([]byte(c.ID)), "flags": contextFlags(collectingAt(clast, now)),
				"name": c.Name, "context": c.Context, "title": c.Title, "units": c.Units, "family": c.Family,
				"chart_type": c.ChartType, "priority": c.Priority, "update_every": max(c.UpdateEvery, 1),
				"first_time_t": st.FirstTime, "last_time_t": clast, "collected": collectingAt(clast, now), "deleted": false,
				"labels":     map[string]string{"_collect_plugin": c.Plugin, "_collect_module": c.Module},
				"dimensions": dims,
			}
		}
		o["charts"] = cm
	}
	return o
}

// contextFlags is Netdata's flags text of a context, chart or dimension:
// COLLECTED while it is collected, ARCHIVED once it stopped; its stored
// points are still served either way (LIVE_RETENTION).
func contextFlags(collected bool) string {
	if collected {
		return "COLLECTED LIVE_RETENTION "
	}
	return "ARCHIVED LIVE_RETENTION "
}

func fullOption(ctx *fasthttp.RequestCtx) bool {
	o, _ := arg(ctx, "options")
	return strings.Contains(o, "full") || strings.Contains(o, "charts")
}

func (s *Server) contexts(ctx *fasthttp.RequestCtx, ver int) error {
	ix := s.index2()
	full := fullOption(ctx)
	cs := map[string]any{}
	for _, name := range ix.contexts {
		cs[name] = s.contextObject(name, ix.byContext[name], full)
	}
	out := map[string]any{
		"hostname": s.host.Hostname, "machine_guid": s.host.GUID, "node_id": s.host.NodeID, "claim_id": "",
		"contexts": cs,
	}
	if ver >= 2 {
		out["nodes"] = s.nodeList()
	}
	return writeJSON(ctx, out)
}

func (s *Server) context(ctx *fasthttp.RequestCtx, _ int) error {
	name, _ := arg(ctx, "context")
	if name == "" {
		name, _ = arg(ctx, "ctx")
	}
	if name == "" {
		return httpx.BadRequest("No context is given at the request.")
	}
	charts := s.index2().byContext[name]
	if len(charts) == 0 {
		return httpx.Errorf(fasthttp.StatusNotFound, "Context is not found: %s", trimArg(name))
	}
	return writeJSON(ctx, s.contextObject(name, charts, fullOption(ctx)))
}

// search is a case-insensitive substring search over chart ids, names,
// contexts and titles.
func (s *Server) search(ctx *fasthttp.RequestCtx, _ int) error {
	q, _ := arg(ctx, "q")
	q = strings.TrimSpace(q)
	if q == "" {
		return httpx.BadRequest("No search text is given at the request: use q=")
	}
	if len(q) > maxAIQuery {
		return httpx.BadRequest("q is longer than %d bytes", maxAIQuery)
	}
	limit := 100
	if l, ok := arg(ctx, "limit"); ok && l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 {
			return httpx.BadRequest("limit must be a positive integer, got %q", trimArg(l))
		}
		limit = n
	}
	lq := strings.ToLower(q)
	results := []map[string]any{}
	for _, c := range s.o.DB.Charts() {
		if len(results) >= limit {
			break
		}
		if strings.Contains(strings.ToLower(c.ID), lq) || strings.Contains(strings.ToLower(c.Title), lq) ||
			strings.Contains(strings.ToLower(c.Context), lq) || strings.Contains(strings.ToLower(c.Name), lq) {
			results = append(results, map[string]any{
				"id": c.ID, "name": c.Name, "title": c.Title, "context": c.Context, "family": c.Family,
				"units": c.Units, "data_url": dataURL(c.ID),
			})
		}
	}
	return writeJSON(ctx, map[string]any{"q": q, "count": len(results), "results": results})
}
