package api

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/health"
	"peerdns/agent/logs"
	"peerdns/agent/query"
	"peerdns/agent/store"
	"peerdns/http/httpx"
)

// The AI helpers are compact read endpoints for local assistants: a host
// snapshot, a catalog search and a windowed summary of one chart. They
// return small JSON documents with plain numbers (null when unknown).

// short is v with the 7 significant digits the store keeps (float32):
// 10.32, not 10.319999694824219, which only costs a model tokens. Not
// finite stays null.
func short(v float64) nullFloat {
	if !finite(v) {
		return noValue
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 7, 64), 64)
	if err != nil {
		return nullFloat(v)
	}
	return nullFloat(r)
}

// latestMap is the newest value of each dimension of a chart by id.
func (s *Server) latestMap(id string) map[string]float64 {
	c, ok := s.o.DB.Chart(id)
	if !ok {
		return nil
	}
	_, vals, ok := s.o.DB.Latest(id)
	if !ok {
		return nil
	}
	m := make(map[string]float64, len(c.Dims))
	for i, d := range c.Dims {
		if i < len(vals) {
			m[d.ID] = vals[i]
		}
	}
	return m
}

func sumExcept(m map[string]float64, skip ...string) float64 {
	t := 0.0
outer:
	for k, v := range m {
		for _, s := range skip {
			if k == s {
				continue outer
			}
		}
		if finite(v) {
			t += v
		}
	}
	return t
}

// pct is part of total in percent with two decimals; no value when the
// total is not positive.
func pct(part, total float64) nullFloat {
	if total <= 0 {
		return noValue
	}
	return nullFloat(math.Round(part/total*10000) / 100) // NaN stays NaN: no value
}

// aiSnapshot: health, KPIs, anomalies and alerts, catalog and storage.
//
// Anomalies come from the detector's event log (Options.Anomaly): the
// events of the last ten minutes, counted per chart, and the newest few.
// Without a detector the member says the data is not available:
// reporting "0 anomalies" would tell an assistant the host looks normal
// when nothing looked at all.
func (s *Server) aiSnapshot(ctx *fasthttp.RequestCtx, _ int) error {
	normal, warning, critical := s.alarmCounts()
	status := "ok"
	if critical > 0 {
		status = "critical"
	} else if warning > 0 {
		status = "warning"
	}
	kpis := map[string]any{}
	if m := s.latestMap("system.cpu"); m != nil {
		kpis["cpu_percent"] = math.Round(sumExcept(m, "idle")*100) / 100
	}
	if m := s.latestMap("system.load"); m != nil {
		kpis["load1"], kpis["load5"], kpis["load15"] = short(m["load1"]), short(m["load5"]), short(m["load15"])
	}
	if m := s.latestMap("system.ram"); m != nil {
		kpis["ram_used_percent"] = pct(m["used"], sumExcept(m))
	}
	if m := s.latestMap("system.swap"); m != nil {
		kpis["swap_used_percent"] = pct(m["used"], sumExcept(m))
	}
	if m := s.latestMap("system.net"); m != nil {
		kpis["net_received_kilobits_s"], kpis["net_sent_kilobits_s"] = short(m["received"]), short(math.Abs(m["sent"]))
	}
	if m := s.latestMap("system.io"); m != nil {
		kpis["disk_read_kib_s"], kpis["disk_write_kib_s"] = short(m["in"]), short(math.Abs(m["out"]))
	}
	disks := []map[string]any{}
	for _, c := range s.index2().byContext["disk.space"] {
		if m := s.latestMap(c.ID); m != nil {
			disks = append(disks, map[string]any{"chart": c.ID, "mount": c.Family, "used_percent": pct(m["used"], sumExcept(m))})
		}
	}
	kpis["disk_space"] = disks

	now := s.now().Unix()
	charts := s.o.DB.Charts()
	raisedList := []map[string]any{}
	for _, a := range s.alerts() {
		if raised(a.Status) {
			raisedList = append(raisedList, map[string]any{"name": a.Name, "chart": a.Chart, "status": a.Status,
				"value": short(a.Value), "units": a.Units, "since": a.LastStatusChange, "info": a.Info})
		}
	}
	ix := s.index2()
	dims := 0
	for _, c := range charts {
		dims += len(c.Dims)
	}
	st := s.stats()
	return writeJSON(ctx, map[string]any{
		"hostname":  s.host.Hostname,
		"time":      now,
		"health":    map[string]any{"status": status, "alarms": alarmCount{normal, warning, critical}},
		"kpis":      kpis,
		"anomalies": s.anomalySummary(now),
		"alerts":    raisedList,
		"catalog":   map[string]any{"charts": len(charts), "dimensions": dims, "contexts": ix.contexts},
		"storage": map[string]any{"dir": st.Dir, "tier0_retention_seconds": int64(st.Tier0Retention.Seconds()),
			"tier1_retention_seconds": int64(st.Tier1Retention.Seconds()), "memory_bytes": st.MemoryBytes,
			"tier1_disk_bytes": st.Tier1DiskBytes, "first_entry": st.FirstTime, "last_entry": st.LastTime},
	})
}

// aiAnomalyWindow is the span of anomaly events the snapshot sums up, and
// aiAnomalyMax the most events it reads for that (it says when capped).
const (
	aiAnomalyWindow = 10 * time.Minute
	aiAnomalyMax    = 1000
	aiAnomalyLatest = 5
	aiAnomalyCharts = 10
)

func (s *Server) anomalySummary(now int64) map[string]any {
	if s.o.Anomaly == nil {
		return map[string]any{"available": false, "reason": "no anomaly detector running on this agent"}
	}
	since := time.Unix(now, 0).Add(-aiAnomalyWindow)
	es, capped := s.o.Anomaly.Before(0, aiAnomalyMax, func(e *logs.Entry) bool { return !e.Time.Before(since) })
	perChart := map[string]int{}
	for _, e := range es {
		perChart[e.Unit]++
	}
	type chartCount struct {
		Chart  string `json:"chart"`
		Events int    `json:"events"`
	}
	top := make([]chartCount, 0, len(perChart))
	for c, n := range perChart {
		top = append(top, chartCount{c, n})
	}
	slices.SortFunc(top, func(a, b chartCount) int {
		if a.Events != b.Events {
			return b.Events - a.Events
		}
		return strings.Compare(a.Chart, b.Chart)
	})
	latest := []map[string]any{}
	for _, e := range es[:min(len(es), aiAnomalyLatest)] {
		latest = append(latest, map[string]any{"time": e.Time.Unix(), "chart": e.Unit, "severity": logs.Severity(e.Priority), "message": e.Message})
	}
	return map[string]any{
		"available": true, "window_seconds": int64(aiAnomalyWindow.Seconds()), "events": len(es), "capped": capped,
		"charts": top[:min(len(top), aiAnomalyCharts)], "latest": latest,
	}
}

// maxAIQuery bounds the q of ai/charts and q (search): a catalog search,
// not a document.
const maxAIQuery = 256

// aiCharts searches the catalog: q (substring of id, title, context or
// family; empty lists all), limit (default 20, at most 500).
func (s *Server) aiCharts(ctx *fasthttp.RequestCtx, _ int) error {
	q, _ := arg(ctx, "q")
	if len(q) > maxAIQuery {
		return httpx.BadRequest("q is longer than %d bytes", maxAIQuery)
	}
	q = strings.ToLower(strings.TrimSpace(q))
	limit := 20
	if l, ok := arg(ctx, "limit"); ok && l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 || n > 500 {
			return httpx.BadRequest("limit must be an integer from 1 to 500, got %q", trimArg(l))
		}
		limit = n
	}
	out := []map[string]any{}
	matched := 0
	for _, c := range s.o.DB.Charts() {
		if q != "" && !strings.Contains(strings.ToLower(c.ID), q) && !strings.Contains(strings.ToLower(c.Title), q) &&
			!strings.Contains(strings.ToLower(c.Context), q) && !strings.Contains(strings.ToLower(c.Family), q) {
			continue
		}
		matched++
		if len(out) >= limit {
			continue
		}
		var names []string
		for _, d := range c.Dims {
			if !d.Hidden {
				names = append(names, d.Name)
			}
		}
		out = append(out, map[string]any{"id": c.ID, "title": c.Title, "context": c.Context, "family": c.Family,
			"units": c.Units, "dimensions": names})
	}
	return writeJSON(ctx, map[string]any{"q": q, "matched": matched, "count": len(out), "charts": out})
}

// aiChartSummary is /api/v3/ai/chart/{id}/summary: per dimension the min,
// average and max over the window's points and the last collected value.
// after (default -600), points (default 60) and group are the data
// query's.
func (s *Server) aiChartSummary(ctx *fasthttp.RequestCtx, id string) error {
	if err := checkChartID(id); err != nil {
		return err
	}
	c, ok := s.o.DB.Chart(id)
	if !ok {
		return httpx.Errorf(fasthttp.StatusNotFound, "Chart is not found: %s", trimArg(id))
	}
	req, err := query.ParseRequest(getter(ctx))
	if err != nil {
		return httpx.BadRequest("%v", err)
	}
	if _, ok := arg(ctx, "after"); !ok {
		req.After = -600
	}
	req.Chart, req.Context, req.Dimensions, req.Options = c.ID, "", "", 0
	res, _, err := s.runQuery(store.ReadData, &req, []*store.ChartDef{c}, s.now().Unix())
	if err != nil {
		return err
	}
	dims := make([]map[string]any, 0, len(res.Columns))
	for col, cl := range res.Columns {
		mn, mx, sum, n := math.Inf(1), math.Inf(-1), 0.0, 0
		for r := 0; r < res.Rows(); r++ {
			v := res.At(r, col)
			if !finite(v) {
				continue
			}
			mn, mx, sum, n = math.Min(mn, v), math.Max(mx, v), sum+v, n+1
		}
		d := map[string]any{"id": cl.ID, "name": cl.Name, "min": noValue, "avg": noValue, "max": noValue, "last": short(res.Latest[col])}
		if n > 0 {
			d["min"], d["avg"], d["max"] = short(mn), short(sum/float64(n)), short(mx)
		}
		dims = append(dims, d)
	}
	return writeJSON(ctx, map[string]any{
		"chart": c.ID, "title": c.Title, "units": c.Units, "context": c.Context,
		"after": res.Plan.After, "before": res.Plan.Before, "points": res.Rows(), "group": req.Group.String(),
		"dimensions": dims, "alerts": chartAlerts(s.alerts(), c.ID),
	})
}

func chartAlerts(as []health.Alert, chart string) []map[string]any {
	out := []map[string]any{}
	for _, a := range as {
		if a.Chart == chart {
			out = append(out, map[string]any{"name": a.Name, "status": a.Status, "value": short(a.Value), "units": a.Units})
		}
	}
	return out
}

// checkChartID refuses ids no chart can have before any lookup: a path
// separator or "..", control characters, or more than 256 bytes.
func checkChartID(id string) error {
	if id == "" || len(id) > 256 || strings.Contains(id, "/") || strings.Contains(id, "..") ||
		strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return httpx.BadRequest("Invalid chart id %q: it must not be empty, contain '/', '..' or control characters, or pass 256 bytes", trimArg(id))
	}
	return nil
}
