package query

import (
	"math"
	"sort"
	"time"

	"peerdns/messages"
)

// Keys are the member names of Netdata's v2 answers that have a short
// form (the default) and a long one (options=long-json-keys).
type Keys struct {
	Selected, Excluded, Queried, Failed                    string
	Dimensions, Instances, Contexts, Alerts, Statistics    string
	NodeID, MachineGUID, Name, Hostname, Value, LabelVals  string
	AgentIndex, NodeIndex, Status                          string
	Clear, Warning, Critical, Other                        string
	Count, Volume, AnomalyRate, AnomalyCount, Contribution string
	PointAnnotations, PointSchema, Priority                string
}

// ShortKeys and LongKeys are Netdata's two key sets.
var (
	ShortKeys = Keys{"sl", "ex", "qr", "fl", "ds", "is", "ctx", "al", "sts", "nd", "mg", "nm", "nm", "vl", "vl",
		"ai", "ni", "st", "cl", "wr", "cr", "ot", "cnt", "vol", "arp", "arc", "con", "pa", "point", "pri"}
	LongKeys = Keys{"selected", "excluded", "queried", "failed", "dimensions", "instances", "contexts", "alerts", "statistics",
		"node_id", "machine_guid", "name", "hostname", "value", "label_values",
		"agents_array_index", "nodes_array_index", "status", "clear", "warning", "critical", "other",
		"count", "volume", "anomaly_rate_percent", "anomalous_points_count", "contribution_percent",
		"point_annotations_bitmap", "point_schema", "priority"}
)

// KeysFor picks the key set the options ask for.
func KeysFor(o Options) *Keys {
	if o&OptLongKeys != 0 {
		return &LongKeys
	}
	return &ShortKeys
}

// Versions are the hashes a v2 answer carries for caching clients.
type Versions struct {
	NodesHard, ContextsHard, ContextsSoft, AlertsHard, AlertsSoft uint64
}

// TierInfo is one storage tier as the db section shows it.
type TierInfo struct {
	UpdateEvery int64
	First, Last int64
}

// V2Meta is what a json2 answer says beyond the result itself.
type V2Meta struct {
	API      int
	Agent    V2Node // this agent (agents[0])
	Now      int64
	Versions Versions
	Tiers    [2]TierInfo
	// Received and Executed time the request (timings); Output is set
	// by the renderer.
	Received, Prepared, Executed time.Time
}

func (w *jw) counts(k string, c Counts, K *Keys) {
	if c == (Counts{}) {
		return
	}
	w.obj(k)
	if c.Selected > 0 {
		w.int(K.Selected, int64(c.Selected))
	}
	if c.Excluded > 0 {
		w.int(K.Excluded, int64(c.Excluded))
	}
	if c.Queried > 0 {
		w.int(K.Queried, int64(c.Queried))
	}
	if c.Failed > 0 {
		w.int(K.Failed, int64(c.Failed))
	}
	w.endObj()
}

type alertCounts struct{ clear, warning, critical, other int }

func (a *alertCounts) add(st string) {
	switch st {
	case "CLEAR":
		a.clear++
	case "WARNING":
		a.warning++
	case "CRITICAL":
		a.critical++
	default:
		a.other++
	}
}

func (w *jw) alerts(name string, a alertCounts, K *Keys, item bool) {
	if a == (alertCounts{}) {
		return
	}
	if item {
		w.obj("")
	} else {
		w.obj(K.Alerts)
	}
	if name != "" {
		w.str(K.Name, name)
	}
	if a.clear > 0 {
		w.int(K.Clear, int64(a.clear))
	}
	if a.warning > 0 {
		w.int(K.Warning, int64(a.warning))
	}
	if a.critical > 0 {
		w.int(K.Critical, int64(a.critical))
	}
	if a.other > 0 {
		w.int(K.Other, int64(a.other))
	}
	w.endObj()
}

// stats writes Netdata's statistics object of a storage point: min, max,
// avg, anomaly rate and contribution to the query's total, or with raw
// the sums and counts a merging client needs.
func (w *jw) stats(s Stat, total float64, ue int64, raw bool, K *Keys) {
	if s.Count == 0 {
		return
	}
	w.obj(K.Statistics)
	w.num("min", s.Min)
	w.num("max", s.Max)
	if raw {
		w.int(K.Count, int64(s.Count))
		w.num("sum", s.Sum)
		w.num(K.Volume, s.Sum*float64(ue))
		w.int(K.AnomalyCount, int64(math.Round(s.Anomaly)))
	} else {
		w.num("avg", s.Avg())
		w.num(K.AnomalyRate, s.AnomalyRate())
		con := 0.0
		if total > 0 {
			con = s.Sum * 100 / total
		}
		w.num(K.Contribution, con)
	}
	w.endObj()
}

// summary of one object kind: its metrics' counts and merged statistics.
type sumEntry struct {
	id, name string
	prio     int
	inst     Counts
	dims     Counts
	al       alertCounts
	st       Stat
}

func newSum(id, name string) *sumEntry {
	return &sumEntry{id: id, name: name, st: newStat()}
}

func (e *sumEntry) addMetric(t *V2Target, m *V2Metric) {
	mc := m.counts()
	e.dims.add(mc)
	if mc.Selected > 0 && mc.Queried > 0 {
		e.st.merge(m.Stat)
	}
}

// instance counts of an object: an instance is selected when one of its
// metrics is, queried when one of them was.
func instanceCounts(t *V2Target, inst int) Counts {
	var c Counts
	a, b := t.instRange(inst)
	for k := a; k < b; k++ {
		mc := t.Metrics[k].counts()
		c.Selected = max(c.Selected, mc.Selected)
		c.Queried = max(c.Queried, mc.Queried)
		c.Failed = max(c.Failed, mc.Failed)
	}
	if c.Selected == 0 {
		c.Excluded = 1
	}
	return c
}

// totals follows Netdata's aggregate_into_summary_totals: an object with a
// selected metric is selected (and queried or failed), otherwise excluded.
func (c *Counts) total(dims Counts) {
	if dims.Selected > 0 {
		c.Selected++
		if dims.Queried > 0 {
			c.Queried++
		} else if dims.Failed > 0 {
			c.Failed++
		}
	} else {
		c.Excluded++
	}
}

// AppendJSON2 renders the json2 answer: api, versions, summary, totals,
// functions, result, db, view, agents and timings (Netdata's order and
// names; see the API package doc for where they differ from the contract).
// With another format (a non-nil body), result is that format's body,
// as Netdata writes it inside the v2 wrapper (json adds anomaly_rates).
func (r *V2Result) AppendJSON2(dst []byte, meta *V2Meta, body *Result) []byte {
	t := r.Target
	req := t.Req
	K := KeysFor(req.Options)
	minimal := req.Options&OptMinimalStats != 0
	raw := req.Options&OptRaw != 0
	ue := r.Plan.ViewUpdateEvery()
	if ue == 0 {
		ue = max(r.Plan.Step, 1)
	}
	w := &jw{b: dst}
	w.open('{')
	w.int("api", int64(meta.API))
	if req.Options&OptDebug != 0 {
		r.appendRequestEcho(w)
	}
	// minimal-stats leaves out what Netdata's jsonwrap-v2.c leaves out
	// with it: versions, the nodes' status, the counts inside the
	// summary, the summary's alerts, totals, functions, agents and
	// timings. The summary's lists with their statistics, result, db and
	// view stay.
	if !minimal {
		w.obj("versions")
		w.uint("routing_hard_hash", 1)
		w.uint("nodes_hard_hash", meta.Versions.NodesHard)
		w.uint("contexts_hard_hash", meta.Versions.ContextsHard)
		w.uint("contexts_soft_hash", meta.Versions.ContextsSoft)
		w.uint("alerts_hard_hash", meta.Versions.AlertsHard)
		w.uint("alerts_soft_hash", meta.Versions.AlertsSoft)
		w.endObj()
	}
	total := r.Global.Sum
	var tNodes, tCtx, tInst, tDims, tKeys, tVals Counts

	// summary: its six lists keep their long names under either key set
	// (Netdata's jsonwrap-v2.c passes them as literals); only the members
	// inside them are shortened.
	w.obj("summary")
	// nodes
	w.arr("nodes")
	for ni, n := range t.Nodes {
		if !t.NodeInUse[ni] {
			continue
		}
		e := newSum(n.GUID, n.Hostname)
		var ic Counts
		for ii := range t.Instances {
			if t.Instances[ii].Node == ni {
				ic.add(instanceCounts(t, ii))
				for _, a := range t.Instances[ii].Alerts {
					e.al.add(a.Status)
				}
			}
		}
		for k := range t.Metrics {
			if m := &t.Metrics[k]; t.Instances[m.Inst].Node == ni {
				e.addMetric(t, m)
			}
		}
		w.obj("")
		w.str(K.MachineGUID, n.GUID)
		if n.NodeID != "" {
			w.str(K.NodeID, n.NodeID)
		}
		w.str(K.Hostname, n.Hostname)
		w.int(K.NodeIndex, int64(ni))
		if !minimal {
			w.obj(K.Status)
			w.int(K.AgentIndex, 0)
			w.int("code", 200)
			w.str("msg", "")
			w.num("ms", float64(meta.Executed.Sub(meta.Prepared).Microseconds())/1000)
			w.endObj()
			w.counts(K.Instances, ic, K)
			w.counts(K.Dimensions, e.dims, K)
			w.alerts("", e.al, K, false)
		}
		w.stats(e.st, total, ue, raw, K)
		w.endObj()
		tNodes.total(e.dims)
	}
	w.endArr()
	// contexts
	ctxOrder := []string{}
	ctxs := map[string]*sumEntry{}
	for ii := range t.Instances {
		c := t.Instances[ii].Chart.Context
		e, ok := ctxs[c]
		if !ok {
			e = newSum(c, c)
			ctxs[c] = e
			ctxOrder = append(ctxOrder, c)
		}
		e.inst.add(instanceCounts(t, ii))
		for _, a := range t.Instances[ii].Alerts {
			e.al.add(a.Status)
		}
	}
	for k := range t.Metrics {
		m := &t.Metrics[k]
		ctxs[t.Instances[m.Inst].Chart.Context].addMetric(t, m)
	}
	w.arr("contexts")
	for _, c := range ctxOrder {
		e := ctxs[c]
		w.obj("")
		w.str("id", c)
		if !minimal {
			w.counts(K.Instances, e.inst, K)
			w.counts(K.Dimensions, e.dims, K)
			w.alerts("", e.al, K, false)
		}
		w.stats(e.st, total, ue, raw, K)
		w.endObj()
		tCtx.total(e.dims)
	}
	w.endArr()
	// instances
	w.arr("instances")
	for ii := range t.Instances {
		in := &t.Instances[ii]
		e := newSum(in.Chart.ID, in.Chart.Name)
		for _, a := range in.Alerts {
			e.al.add(a.Status)
		}
		a, b := t.instRange(ii)
		for k := a; k < b; k++ {
			e.addMetric(t, &t.Metrics[k])
		}
		w.obj("")
		w.str("id", in.Chart.ID)
		if in.Chart.Name != "" && in.Chart.Name != in.Chart.ID {
			w.str(K.Name, in.Chart.Name)
		}
		w.int(K.NodeIndex, int64(in.Node))
		if total > 0 && e.st.Count > 0 {
			if con := e.st.Sum * 100 / total; con > 0 {
				w.num(K.Contribution, con)
			}
		}
		if !minimal {
			w.counts(K.Dimensions, e.dims, K)
			w.alerts("", e.al, K, false)
		}
		w.stats(e.st, total, ue, raw, K)
		w.endObj()
		tInst.total(e.dims)
	}
	w.endArr()
	// dimensions, by name, ordered by priority (the dimension's position)
	// then name
	dimOrder := []string{}
	dims := map[string]*sumEntry{}
	for k := range t.Metrics {
		m := &t.Metrics[k]
		d := &t.Instances[m.Inst].Chart.Dims[m.Dim]
		n := d.Name
		if n == "" {
			n = d.ID
		}
		e, ok := dims[n]
		if !ok {
			e = newSum(n, n)
			e.prio = m.Dim
			dims[n] = e
			dimOrder = append(dimOrder, n)
		}
		e.prio = min(e.prio, m.Dim)
		e.addMetric(t, m)
	}
	sort.SliceStable(dimOrder, func(i, j int) bool {
		a, b := dims[dimOrder[i]], dims[dimOrder[j]]
		if a.prio != b.prio {
			return a.prio < b.prio
		}
		return a.id < b.id
	})
	w.arr("dimensions")
	for _, n := range dimOrder {
		e := dims[n]
		w.obj("")
		w.str("id", n)
		if !minimal {
			w.counts(K.Dimensions, e.dims, K)
		}
		w.stats(e.st, total, ue, raw, K)
		w.int(K.Priority, int64(e.prio))
		w.endObj()
		tDims.total(e.dims)
	}
	w.endArr()
	// labels: keys, then their values
	type lv struct {
		e     *sumEntry
		order []string
		vals  map[string]*sumEntry
	}
	keyOrder := []string{}
	keys := map[string]*lv{}
	for ii := range t.Instances {
		for _, l := range t.Instances[ii].Labels {
			k, ok := keys[l.Key]
			if !ok {
				k = &lv{e: newSum(l.Key, l.Key), vals: map[string]*sumEntry{}}
				keys[l.Key] = k
				keyOrder = append(keyOrder, l.Key)
			}
			v, ok := k.vals[l.Value]
			if !ok {
				v = newSum(l.Value, l.Value)
				k.vals[l.Value] = v
				k.order = append(k.order, l.Value)
			}
			a, b := t.instRange(ii)
			for m := a; m < b; m++ {
				k.e.addMetric(t, &t.Metrics[m])
				v.addMetric(t, &t.Metrics[m])
			}
		}
	}
	w.arr("labels")
	for _, kn := range keyOrder {
		k := keys[kn]
		w.obj("")
		w.str("id", kn)
		if !minimal {
			w.counts(K.Dimensions, k.e.dims, K)
		}
		w.stats(k.e.st, total, ue, raw, K)
		tKeys.total(k.e.dims)
		w.arr(K.LabelVals)
		for _, vn := range k.order {
			v := k.vals[vn]
			w.obj("")
			w.str("id", vn)
			if !minimal {
				w.counts(K.Dimensions, v.dims, K)
			}
			w.stats(v.st, total, ue, raw, K)
			w.endObj()
			tVals.total(v.dims)
		}
		w.endArr()
		w.endObj()
	}
	w.endArr()
	byName := map[string]*alertCounts{}
	names := []string{}
	for ii := range t.Instances {
		for _, a := range t.Instances[ii].Alerts {
			c, ok := byName[a.Name]
			if !ok {
				c = &alertCounts{}
				byName[a.Name] = c
				names = append(names, a.Name)
			}
			c.add(a.Status)
		}
	}
	sort.Strings(names)
	if !minimal {
		w.arr("alerts")
		for _, n := range names {
			w.alerts(n, *byName[n], K, true)
		}
		w.endArr()
	}
	if raw {
		w.obj("globals")
		w.stats(r.Global, total, ue, raw, K)
		w.endObj()
	}
	w.endObj() // summary

	if !minimal {
		w.obj("totals")
		for _, x := range []struct {
			k string
			c Counts
		}{{"nodes", tNodes}, {"contexts", tCtx}, {"instances", tInst}, {"dimensions", tDims}, {"label_keys", tKeys}, {"label_key_values", tVals}} {
			w.counts(x.k, x.c, K)
		}
		w.endObj()
	}
	// Instances here have no functions of their own: the agent's
	// functions run on the peer-to-peer RPC, not per chart.
	if !minimal {
		w.arr("functions")
		w.endArr()
	}

	// result
	if body == nil {
		r.appendResult(w, K)
	} else {
		w.key("result")
		w.b = body.AppendResultValue(w.b)
		if body.Request.Format == FormatJSON && len(body.Columns) > 0 {
			// v2 queries ask for the anomaly rates beside a json result
			// (Netdata's RETURN_JWAR, on by default there): the same
			// layout with each point's anomaly rate as its value.
			ar := *body
			ar.Values = r.Anomaly
			w.key("anomaly_rates")
			w.b = ar.AppendResultValue(w.b)
		}
	}

	// db
	first, last := int64(0), int64(0)
	for _, ti := range meta.Tiers {
		if ti.First > 0 && (first == 0 || ti.First < first) {
			first = ti.First
		}
		last = max(last, ti.Last)
	}
	w.obj("db")
	w.int("tiers", 2)
	minUE := int64(0)
	for ii := range t.Instances {
		u := int64(max(t.Instances[ii].Chart.UpdateEvery, 1))
		if minUE == 0 || u < minUE {
			minUE = u
		}
	}
	w.int("update_every", max(minUE, 1))
	w.int("first_entry", first)
	w.int("last_entry", last)
	r.units(w, true)
	w.obj("dimensions")
	r.columnStrings(w, "ids", func(c *V2Column) string { return c.ID })
	r.columnStrings(w, "units", func(c *V2Column) string { return c.Units })
	r.columnStats(w, K, false)
	w.endObj()
	w.arr("per_tier")
	for tier, ti := range meta.Tiers {
		w.obj("")
		w.int("tier", int64(tier))
		w.int("queries", int64(r.Queries[tier]))
		w.int("points", int64(r.DBPoints[tier]))
		w.int("update_every", ti.UpdateEvery)
		w.int("first_entry", ti.First)
		w.int("last_entry", ti.Last)
		w.endObj()
	}
	w.endArr()
	w.endObj() // db

	// view
	w.obj("view")
	r.title(w)
	w.int("update_every", ue)
	w.int("after", r.viewAfter())
	w.int("before", r.Plan.Before)
	if r.Folded > 0 {
		w.obj("cardinality")
		w.int("folded", int64(r.Folded))
		w.num("cut", r.Cut)
		w.endObj()
	}
	if raw {
		w.int("points", int64(r.Rows()))
	}
	r.units(w, false)
	if sh := r.shown(); len(sh) > 0 {
		w.str("chart_type", t.Instances[sh[0]].Chart.ChartType)
	}
	w.obj("dimensions")
	// Netdata names the deepest pass's grouping.
	gb, gl := req.GroupBy, req.GroupByLabels
	if req.GroupBy2 != 0 {
		gb, gl = req.GroupBy2, req.GroupByLabels2
	}
	w.arr("grouped_by")
	for _, g := range gb.Names() {
		if g == "label" {
			for _, l := range gl {
				w.str("", "label:"+l)
			}
			continue
		}
		w.str("", g)
	}
	w.endArr()
	r.columnStrings(w, "ids", func(c *V2Column) string { return c.ID })
	r.columnStrings(w, "names", func(c *V2Column) string { return c.Name })
	r.columnStrings(w, "units", func(c *V2Column) string { return r.viewUnits(c) })
	w.arr("priorities")
	for i := range r.Columns {
		w.int("", int64(r.Columns[i].Priority))
	}
	w.endArr()
	w.arr("aggregated")
	for i := range r.Columns {
		w.int("", int64(r.Columns[i].Aggregated))
	}
	w.endArr()
	r.columnStats(w, K, true)
	if req.Options&OptGroupByLabels != 0 {
		w.obj("labels")
		lk := []string{}
		for i := range r.Columns {
			for k := range r.Columns[i].Labels {
				if !containsStr(lk, k) {
					lk = append(lk, k)
				}
			}
		}
		sort.Strings(lk)
		for _, k := range lk {
			w.arr(k)
			for i := range r.Columns {
				vs, ok := r.Columns[i].Labels[k]
				if !ok {
					w.null("")
					continue
				}
				w.arr("")
				for _, v := range vs {
					w.str("", v)
				}
				w.endArr()
			}
			w.endArr()
		}
		w.endObj()
	}
	w.endObj() // dimensions
	mn, mx := math.Inf(1), math.Inf(-1)
	for _, v := range r.Values {
		if !math.IsNaN(v) {
			mn, mx = math.Min(mn, v), math.Max(mx, v)
		}
	}
	if math.IsInf(mn, 1) {
		mn, mx = 0, 0
	}
	w.num("min", mn)
	w.num("max", mx)
	w.endObj() // view

	if minimal {
		w.close('}')
		return w.b
	}
	done := time.Now()
	w.arr("agents")
	w.obj("")
	w.str("mg", meta.Agent.GUID)
	w.str("nd", meta.Agent.NodeID)
	w.str("nm", meta.Agent.Hostname)
	w.int("now", meta.Now)
	w.int("ai", 0)
	w.obj("timings")
	ms := func(a, b time.Time) float64 { return float64(b.Sub(a).Microseconds()) / 1000 }
	w.num("prep_ms", ms(meta.Received, meta.Prepared))
	w.num("query_ms", ms(meta.Prepared, meta.Executed))
	w.num("output_ms", ms(meta.Executed, done))
	w.num("total_ms", ms(meta.Received, done))
	w.num("cloud_ms", ms(meta.Received, done))
	w.endObj()
	w.endObj()
	w.endArr()
	w.obj("timings")
	w.num("routing_ms", 0)
	w.num("node_max_ms", 0)
	w.num("total_ms", ms(meta.Received, done))
	w.endObj()
	w.close('}')
	return w.b
}

func containsStr(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// viewAfter is the start of the view: the first point's first second.
func (r *V2Result) viewAfter() int64 { return r.Plan.After }

// shown lists the instances the view is about: those with a selected
// metric (every instance in scope when none is selected).
func (r *V2Result) shown() []int {
	t := r.Target
	var out []int
	for ii := range t.Instances {
		if t.NeedsWindow(ii) {
			out = append(out, ii)
		}
	}
	if len(out) == 0 {
		for ii := range t.Instances {
			out = append(out, ii)
		}
	}
	return out
}

// percentageUnits reports whether the view's values are percentages.
func (r *V2Result) percentageUnits() bool {
	req := r.Target.Req
	return req.Aggregation == AggPercentage || req.GroupBy&GroupByPercentageOfInstance != 0 || req.Options&OptPercentage != 0 ||
		(req.GroupBy2 != 0 && req.Aggregation2 == AggPercentage)
}

func (r *V2Result) viewUnits(c *V2Column) string {
	if r.percentageUnits() {
		return "%"
	}
	return c.Units
}

// units writes the combined units: one string, or an array when the
// contexts differ (ignorePct: the db section, which shows stored units).
func (r *V2Result) units(w *jw, ignorePct bool) {
	t := r.Target
	if !ignorePct && r.percentageUnits() {
		w.str("units", "%")
		return
	}
	var us []string
	for _, ii := range r.shown() {
		if u := t.Instances[ii].Chart.Units; !containsStr(us, u) {
			us = append(us, u)
		}
	}
	switch len(us) {
	case 0:
	case 1:
		w.str("units", us[0])
	default:
		w.arr("units")
		for _, u := range us {
			w.str("", u)
		}
		w.endArr()
	}
}

// title is the context's title, or "Chart for contexts: a, b" for several.
func (r *V2Result) title(w *jw) {
	t := r.Target
	var ctx []string
	var first string
	for _, ii := range r.shown() {
		c := t.Instances[ii].Chart
		if !containsStr(ctx, c.Context) {
			if len(ctx) == 0 {
				first = c.Title
			}
			ctx = append(ctx, c.Context)
		}
	}
	switch len(ctx) {
	case 0:
	case 1:
		w.str("title", first)
	default:
		s := "Chart for contexts: "
		for i, c := range ctx {
			if i > 0 {
				s += ", "
			}
			s += c
		}
		w.str("title", s)
	}
}

func (r *V2Result) columnStrings(w *jw, k string, f func(*V2Column) string) {
	w.arr(k)
	for i := range r.Columns {
		w.str("", f(&r.Columns[i]))
	}
	w.endArr()
}

// columnStats writes per-column statistics arrays: of the output points
// (view) or of the members' stored points (db).
func (r *V2Result) columnStats(w *jw, K *Keys, view bool) {
	st := func(c *V2Column) Stat {
		if view {
			return c.View
		}
		return c.DB
	}
	w.obj(K.Statistics)
	w.arr("min")
	for i := range r.Columns {
		s := st(&r.Columns[i])
		if s.Count == 0 {
			w.null("")
		} else {
			w.num("", s.Min)
		}
	}
	w.endArr()
	w.arr("max")
	for i := range r.Columns {
		s := st(&r.Columns[i])
		if s.Count == 0 {
			w.null("")
		} else {
			w.num("", s.Max)
		}
	}
	w.endArr()
	if r.Target.Req.Options&OptRaw != 0 {
		w.arr("sum")
		for i := range r.Columns {
			w.num("", st(&r.Columns[i]).Sum)
		}
		w.endArr()
		w.arr(K.Count)
		for i := range r.Columns {
			w.int("", int64(st(&r.Columns[i]).Count))
		}
		w.endArr()
		w.arr(K.AnomalyCount)
		for i := range r.Columns {
			w.int("", int64(math.Round(st(&r.Columns[i]).Anomaly)))
		}
		w.endArr()
	} else {
		all := 0.0
		for i := range r.Columns {
			all += math.Abs(st(&r.Columns[i]).Sum)
		}
		w.arr("avg")
		for i := range r.Columns {
			w.num("", st(&r.Columns[i]).Avg())
		}
		w.endArr()
		w.arr(K.AnomalyRate)
		for i := range r.Columns {
			w.num("", st(&r.Columns[i]).AnomalyRate())
		}
		w.endArr()
		w.arr(K.Contribution)
		for i := range r.Columns {
			con := 0.0
			if all > 0 {
				con = math.Abs(st(&r.Columns[i]).Sum) * 100 / all
			}
			w.num("", con)
		}
		w.endArr()
	}
	w.endObj()
}

// appendResult writes json2's result: labels (time and the column ids),
// the point schema and the rows, newest first unless flip, each value a
// [value, anomaly rate, annotations] point (and the metric count with raw).
func (r *V2Result) appendResult(w *jw, K *Keys) {
	req := r.Target.Req
	raw := req.Options&OptRaw != 0
	w.obj("result")
	w.arr("labels")
	w.str("", "time")
	for i := range r.Columns {
		w.str("", r.Columns[i].ID)
	}
	w.endArr()
	w.obj(K.PointSchema)
	w.int("value", 0)
	w.int(K.AnomalyRate, 1)
	w.int(K.PointAnnotations, 2)
	// Netdata's point schema: count with raw, and hidden (the values
	// hidden from a percentage) with raw and aggregation=percentage.
	hidden := raw && r.Hidden != nil
	if raw {
		w.int("count", 3)
	}
	if hidden {
		w.int("hidden", 4)
	}
	w.endObj()
	w.arr("data")
	rows, ncol := r.Rows(), len(r.Columns)
	row := func(i int) {
		w.arr("")
		ts := r.Plan.RowTime(i)
		if req.Options&OptMS != 0 {
			w.int("", ts*1000)
		} else {
			w.int("", ts)
		}
		for c := 0; c < ncol; c++ {
			k := i*ncol + c
			w.arr("")
			v := r.Values[k]
			if math.IsNaN(v) && req.Options&OptNull2Zero != 0 {
				v = 0
			}
			w.num("", v)
			w.num("", r.Anomaly[k])
			w.int("", int64(r.Flags[k]))
			if raw {
				w.int("", int64(r.Counts[k]))
			}
			if hidden {
				w.num("", r.Hidden[k])
			}
			w.endArr()
		}
		w.endArr()
	}
	if req.Options&OptFlip != 0 {
		for i := 0; i < rows; i++ {
			row(i)
		}
	} else {
		for i := rows - 1; i >= 0; i-- {
			row(i)
		}
	}
	w.endArr()
	w.endObj()
}

// appendRequestEcho writes the request as Netdata's debug option echoes it.
func (r *V2Result) appendRequestEcho(w *jw) {
	req := r.Target.Req
	w.obj("request")
	if req.JSON2 {
		w.str("format", "json2")
	} else {
		w.str("format", req.Format.String())
	}
	w.obj("scope")
	w.str("scope_nodes", req.ScopeNodes)
	w.str("scope_contexts", req.ScopeContexts)
	w.endObj()
	w.obj("selectors")
	w.str("nodes", req.Nodes)
	w.str("contexts", req.Contexts)
	w.str("instances", req.Instances)
	w.str("dimensions", req.Dimensions)
	w.str("labels", req.Labels)
	w.str("alerts", req.Alerts)
	w.endObj()
	w.obj("window")
	w.int("after", req.After)
	w.int("before", req.Before)
	w.int("points", int64(req.Points))
	if req.TierSet {
		w.int("tier", int64(req.Tier))
	} else {
		w.null("tier")
	}
	w.endObj()
	w.obj("aggregations")
	w.obj("time")
	w.str("time_group", req.TimeGroup.String())
	w.str("time_group_options", req.TimeGroupOptions)
	if req.Resampling > 0 {
		w.int("time_resampling", req.Resampling)
	} else {
		w.null("time_resampling")
	}
	w.endObj()
	w.arr("metrics")
	w.obj("")
	w.arr("group_by")
	for _, g := range req.GroupBy.Names() {
		w.str("", g)
	}
	w.endArr()
	w.arr("group_by_label")
	for _, l := range req.GroupByLabels {
		w.str("", l)
	}
	w.endArr()
	w.str("aggregation", req.Aggregation.String())
	w.endObj()
	if req.GroupBy2 != 0 {
		w.obj("")
		w.arr("group_by")
		for _, g := range req.GroupBy2.Names() {
			w.str("", g)
		}
		w.endArr()
		w.arr("group_by_label")
		for _, l := range req.GroupByLabels2 {
			w.str("", l)
		}
		w.endArr()
		w.str("aggregation", req.Aggregation2.String())
		w.endObj()
	}
	w.endArr()
	w.endObj()
	w.int("timeout", int64(req.TimeoutMS))
	w.endObj()
}

// AppendResultValue writes the result member's value of a wrapped answer
// in the request's format: text formats as a JSON string, the JSON ones
// as they are.
func (r *Result) AppendResultValue(dst []byte) []byte {
	switch r.Request.Format {
	case FormatCSV, FormatTSV, FormatSSV, FormatSSVComma, FormatHTML, FormatMarkdown:
		body := r.appendBody(nil, true)
		return messages.AppendJSONString(dst, string(body))
	}
	return r.appendBody(dst, true)
}

// AppendCall renders a jsonp or datasource answer of a v2 query: the
// function call around the json2 envelope whose result is body (json for
// jsonp, a DataTable for datasource), as Netdata's v2 data writes every
// format inside its wrapper. A datasource request whose tqx sig is the
// newest row's time gets Google's not_modified reply instead.
func (r *V2Result) AppendCall(dst []byte, meta *V2Meta, body *Result) []byte {
	switch body.Request.Format {
	case FormatJSONP:
		dst = body.appendJSONPOpen(dst)
		dst = r.AppendJSON2(dst, meta, body)
		return append(dst, ");"...)
	case FormatDatasource:
		var done bool
		if dst, done = body.appendDatasourceOpen(dst, &Wrap{LastEntry: r.Plan.Before}); done {
			return dst
		}
		dst = r.AppendJSON2(dst, meta, body)
		return append(dst, "});"...)
	}
	return r.AppendJSON2(dst, meta, body)
}
