package api

import (
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/health"
	"peerdns/agent/query"
	"peerdns/agent/store"
	"peerdns/http/httpx"
)

// contextIndex groups the published chart list by context. It is rebuilt
// when the store publishes a new list (charts registered or replaced).
type contextIndex struct {
	charts    []*store.ChartDef
	byContext map[string][]*store.ChartDef
	contexts  []string // in chart order (priority, id)
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

// appendChart writes Netdata's chart object (as in /api/v1/chart).
func (s *Server) appendChart(b []byte, c *store.ChartDef, alerts []health.Alert, indent string) []byte {
	first := s.stats().FirstTime
	last := s.chartLast(c.ID)
	if last == 0 {
		first = 0
	}
	kv := func(k, v string) {
		b = append(b, indent...)
		b = query.AppendJSONString(b, k)
		b = append(b, ": "...)
		b = query.AppendJSONString(b, v)
		b = append(b, ",\n"...)
	}
	ki := func(k string, v int64) {
		b = append(b, indent...)
		b = query.AppendJSONString(b, k)
		b = append(b, ": "...)
		b = strconv.AppendInt(b, v, 10)
		b = append(b, ",\n"...)
	}
	b = append(b, "{\n"...)
	kv("id", c.ID)
	kv("name", c.Name)
	kv("type", c.Type)
	kv("family", c.Family)
	kv("context", c.Context)
	kv("title", c.Title+" ("+c.ID+")")
	ki("priority", int64(c.Priority))
	kv("plugin", c.Plugin)
	kv("module", c.Module)
	kv("units", c.Units)
	kv("data_url", "/api/v1/data?chart="+c.ID)
	kv("chart_type", c.ChartType)
	dur := int64(0)
	if last > 0 {
		dur = last - first + 1
	}
	ki("duration", dur)
	ki("first_entry", first)
	ki("last_entry", last)
	ki("update_every", int64(max(c.UpdateEvery, 1)))
	b = append(b, indent...)
	b = append(b, "\"dimensions\": {"...)
	n := 0
	for _, d := range c.Dims {
		if d.Hidden {
			continue // Netdata leaves hidden dimensions out of chart listings
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, '\n')
		b = append(b, indent...)
		b = append(b, '\t')
		b = query.AppendJSONString(b, d.ID)
		b = append(b, ": { \"name\": "...)
		b = query.AppendJSONString(b, d.Name)
		b = append(b, " }"...)
	}
	b = append(b, '\n')
	b = append(b, indent...)
	b = append(b, "},\n"...)
	b = append(b, indent...)
	b = append(b, "\"chart_variables\": {\n"...)
	b = append(b, indent...)
	b = append(b, "},\n"...)
	b = append(b, indent...)
	b = append(b, "\"green\": null,\n"...)
	b = append(b, indent...)
	b = append(b, "\"red\": null,\n"...)
	b = append(b, indent...)
	b = append(b, "\"alarms\": {"...)
	n = 0
	for _, a := range alerts {
		if a.Chart != c.ID {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, '\n')
		b = append(b, indent...)
		b = append(b, '\t')
		b = query.AppendJSONString(b, a.Name)
		b = append(b, ": { \"id\": "...)
		b = strconv.AppendUint(b, uint64(a.ID), 10)
		b = append(b, ", \"status\": "...)
		b = query.AppendJSONString(b, string(a.Status))
		b = append(b, ", \"units\": "...)
		b = query.AppendJSONString(b, a.Units)
		b = append(b, ", \"update_every\": "...)
		b = strconv.AppendInt(b, int64(a.UpdateEvery), 10)
		b = append(b, " }"...)
	}
	b = append(b, '\n')
	b = append(b, indent...)
	b = append(b, "},\n"...)
	b = append(b, indent...)
	b = append(b, "\"chart_labels\": {\n"...)
	b = append(b, indent...)
	b = append(b, "\t\"_collect_plugin\": "...)
	b = query.AppendJSONString(b, c.Plugin)
	b = append(b, ",\n"...)
	b = append(b, indent...)
	b = append(b, "\t\"_collect_module\": "...)
	mod := c.Module
	if mod == "" {
		mod = "[none]"
	}
	b = query.AppendJSONString(b, mod)
	b = append(b, '\n')
	b = append(b, indent...)
	b = append(b, "},\n"...)
	b = append(b, indent...)
	b = append(b, "\"functions\": {\n"...)
	b = append(b, indent...)
	b = append(b, "}\n"...)
	b = append(b, indent[:max(len(indent)-1, 0)]...)
	return append(b, '}')
}

func (s *Server) chart(ctx *fasthttp.RequestCtx, _ int) error {
	id, _ := arg(ctx, "chart")
	if id == "" {
		return httpx.BadRequest("No chart id is given at the request.")
	}
	c, ok := s.o.DB.Chart(id)
	if !ok {
		return httpx.Errorf(fasthttp.StatusNotFound, "Chart is not found: %s", id)
	}
	buf := getBuf()
	defer putBuf(buf)
	*buf = s.appendChart(*buf, c, s.alerts(), "\t")
	setBody(ctx, ctJSON, *buf)
	return nil
}

func (s *Server) charts(ctx *fasthttp.RequestCtx, _ int) error {
	charts := s.o.DB.Charts()
	alerts := s.alerts()
	buf := getBuf()
	defer putBuf(buf)
	b := *buf
	b = append(b, "{\n\t\"hostname\": "...)
	b = query.AppendJSONString(b, s.host.Hostname)
	b = append(b, ",\n\t\"version\": "...)
	b = query.AppendJSONString(b, "v"+Version)
	b = append(b, ",\n\t\"release_channel\": \"stable\",\n\t\"os\": "...)
	b = query.AppendJSONString(b, strings.ToLower(s.host.KernelName))
	b = append(b, ",\n\t\"timezone\": "...)
	b = query.AppendJSONString(b, time.Local.String())
	st := s.stats()
	b = append(b, ",\n\t\"update_every\": 1,\n\t\"history\": "...)
	b = strconv.AppendInt(b, int64(st.Tier0Retention.Seconds()), 10)
	b = append(b, ",\n\t\"memory_mode\": \"ram+tier1\",\n\t\"custom_info\": \"\",\n\t\"charts\": {"...)
	dims := 0
	for i, c := range charts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n\t\t"...)
		b = query.AppendJSONString(b, c.ID)
		b = append(b, ": \t\t"...)
		b = s.appendChart(b, c, alerts, "\t\t\t")
		for _, d := range c.Dims {
			if !d.Hidden {
				dims++
			}
		}
	}
	b = append(b, "\n\t},\n\t\"charts_count\": "...)
	b = strconv.AppendInt(b, int64(len(charts)), 10)
	b = append(b, ",\n\t\"dimensions_count\": "...)
	b = strconv.AppendInt(b, int64(dims), 10)
	b = append(b, ",\n\t\"alarms_count\": "...)
	b = strconv.AppendInt(b, int64(len(alerts)), 10)
	b = append(b, ",\n\t\"rrd_memory_bytes\": "...)
	b = strconv.AppendInt(b, st.MemoryBytes, 10)
	b = append(b, ",\n\t\"hosts_count\": 1,\n\t\"hosts\": [\n\t\t{\n\t\t\t\"hostname\": "...)
	b = query.AppendJSONString(b, s.host.Hostname)
	b = append(b, "\n\t\t}\n\t]\n}"...)
	*buf = b
	setBody(ctx, ctJSON, b)
	return nil
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
		"collected": last > 0 && now-last <= 10,
	}
	if full {
		o["deleted"] = false
		o["flags"] = "COLLECTED LIVE_RETENTION "
		o["version"] = st.FirstTime
		cm := map[string]any{}
		for _, c := range charts {
			clast := s.chartLast(c.ID)
			dims := map[string]any{}
			for _, d := range c.Dims {
				dims[d.ID] = map[string]any{"uuid": uuidFrom([]byte(c.ID + "\x00" + d.ID)), "flags": "COLLECTED LIVE_RETENTION ", "name": d.Name, "first_time_t": st.FirstTime, "last_time_t": clast,
					"collected": clast > 0 && now-clast <= 10, "deleted": false, "hidden": d.Hidden}
			}
			cm[c.ID] = map[string]any{
				"uuid": uuidFrom([]byte(c.ID)), "flags": "COLLECTED LIVE_RETENTION ",
				"name": c.Name, "context": c.Context, "title": c.Title, "units": c.Units, "family": c.Family,
				"chart_type": c.ChartType, "priority": c.Priority, "update_every": max(c.UpdateEvery, 1),
				"first_time_t": st.FirstTime, "last_time_t": clast, "collected": clast > 0 && now-clast <= 10, "deleted": false,
				"labels":     map[string]string{"_collect_plugin": c.Plugin, "_collect_module": c.Module},
				"dimensions": dims,
			}
		}
		o["charts"] = cm
	}
	return o
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
		out["nodes"] = []any{s.node()}
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
		return httpx.Errorf(fasthttp.StatusNotFound, "Context is not found: %s", name)
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
	limit := 100
	if l, ok := arg(ctx, "limit"); ok && l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 {
			return httpx.BadRequest("limit must be a positive integer, got %q", l)
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
				"units": c.Units, "data_url": "/api/v1/data?chart=" + c.ID,
			})
		}
	}
	return writeJSON(ctx, map[string]any{"q": q, "count": len(results), "results": results})
}
