package api

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/health"
	"peerdns/agent/ml"
	"peerdns/agent/query"
	"peerdns/agent/store"
	"peerdns/http/httpx"
)

// MLState is what ml_info reads from the anomaly detector (*ml.Detector).
type MLState interface {
	Stats() ml.Stats
}

// v2 answers: the shapes Netdata's v2/v3 endpoints write (its sources
// under src/database/contexts/api_v2_contexts*.c and src/web/api/v2, v3),
// built over the same store, alert engine and detector as v1.

// v2Pattern compiles a v2 selector (Netdata's simple pattern, '|'
// separated) for the listings; nil matches everything.
func v2Match(pattern string, names ...string) bool {
	return query.MatchV2(pattern, names...)
}

// v2Agent is the agents[] entry of v2 answers.
func (s *Server) v2Agent(received time.Time) map[string]any {
	done := time.Now()
	ms := float64(done.Sub(received).Microseconds()) / 1000
	return map[string]any{
		"mg": s.host.GUID, "nd": s.host.NodeID, "nm": s.host.Hostname, "now": s.now().Unix(), "ai": 0,
		"timings": map[string]any{"prep_ms": 0.0, "query_ms": ms, "output_ms": 0.0, "total_ms": ms, "cloud_ms": ms},
	}
}

func cloudTimings(received time.Time) map[string]any {
	ms := float64(time.Since(received).Microseconds()) / 1000
	return map[string]any{"routing_ms": 0.0, "node_max_ms": 0.0, "total_ms": ms}
}

// v2NodeEntry is a node of the contexts, q and alerts answers: Netdata's
// buffer_json_node_add_v2 (mg, nd, nm, ni and the agent's status).
func (s *Server) v2NodeEntry(received time.Time) map[string]any {
	return map[string]any{
		"mg": s.host.GUID, "nd": s.host.NodeID, "nm": s.host.Hostname, "ni": 0,
		"st": map[string]any{"ai": 0, "code": 200, "msg": "", "ms": float64(time.Since(received).Microseconds()) / 1000},
	}
}

func (s *Server) v2Versions() map[string]any {
	v := s.versionHashes()
	return map[string]any{
		"routing_hard_hash": 1, "nodes_hard_hash": v.NodesHard, "contexts_hard_hash": v.ContextsHard,
		"contexts_soft_hash": v.ContextsSoft, "alerts_hard_hash": v.AlertsHard, "alerts_soft_hash": v.AlertsSoft,
	}
}

// contextOptions reads the contexts endpoints' options (Netdata's
// contexts_options: titles, family, units, priorities, retention,
// liveness, dimensions, instances, labels, ...).
func contextOptions(ctx *fasthttp.RequestCtx, def ...string) map[string]bool {
	o := map[string]bool{}
	for _, d := range def {
		o[d] = true
	}
	v, _ := arg(ctx, "options")
	for _, t := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '|' || r == ' ' }) {
		o[strings.ToLower(t)] = true
	}
	return o
}

// contextV2 is one context of /api/v2|v3/contexts.
func (s *Server) contextV2(charts []*store.ChartDef, opt map[string]bool, now int64) map[string]any {
	c0 := charts[0]
	var last int64
	prio := c0.Priority
	for _, c := range charts {
		last = max(last, s.chartLast(c.ID))
		prio = min(prio, c.Priority)
	}
	live := collectingAt(last, now)
	o := map[string]any{}
	if opt["titles"] {
		o["title"] = c0.Title
	}
	if opt["family"] {
		o["family"] = c0.Family
	}
	if opt["units"] {
		o["units"] = c0.Units
	}
	if opt["priorities"] {
		o["priority"] = prio
	}
	if opt["retention"] {
		first := s.stats().FirstTime
		if t1 := s.stats().Tier1First; t1 > 0 && (first == 0 || t1 < first) {
			first = t1
		}
		o["first_entry"] = first
		if live {
			o["last_entry"] = now // Netdata: a collected context's retention reaches now
		} else {
			o["last_entry"] = last
		}
	}
	if opt["liveness"] {
		o["live"] = live
	}
	if opt["dimensions"] {
		var dims []string
		for _, c := range charts {
			for _, d := range c.Dims {
				if n := dimLabel(d); !containsString(dims, n) {
					dims = append(dims, n)
				}
			}
		}
		o["dimensions"] = dims
	}
	if opt["instances"] {
		var in []string
		for _, c := range charts {
			in = append(in, c.Name)
		}
		o["instances"] = in
	}
	if opt["labels"] {
		o["labels"] = aggregatedLabels(charts)
	}
	return o
}

func dimLabel(d store.DimDef) string {
	if d.Name != "" {
		return d.Name
	}
	return d.ID
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// aggregatedLabels is Netdata's label aggregate of a context: each key
// with the values its instances carry.
func aggregatedLabels(charts []*store.ChartDef) map[string][]string {
	out := map[string][]string{}
	for _, c := range charts {
		for _, l := range instanceLabels(c) {
			if !containsString(out[l.Key], l.Value) {
				out[l.Key] = append(out[l.Key], l.Value)
			}
		}
	}
	return out
}

// contextsV2 is /api/v2|v3/contexts: api, nodes, the contexts map
// (priority, retention, liveness, family and units by default), versions,
// agents and timings.
func (s *Server) contextsV2(ctx *fasthttp.RequestCtx, ver int) error {
	received := time.Now()
	opt := contextOptions(ctx, "priorities", "retention", "liveness", "family", "units")
	scope, _ := arg(ctx, "scope_contexts")
	sel, _ := arg(ctx, "contexts")
	nodes, _ := arg(ctx, "scope_nodes")
	if n, _ := arg(ctx, "nodes"); n != "" && nodes == "" {
		nodes = n
	}
	ix := s.index2()
	now := s.now().Unix()
	// after/before keep the contexts with data in that window (Netdata's
	// window filter).
	after, before, err := v2Window(ctx, now)
	if err != nil {
		return err
	}
	first := s.stats().FirstTime
	if t1 := s.stats().Tier1First; t1 > 0 && (first == 0 || t1 < first) {
		first = t1
	}
	cs := map[string]any{}
	nodeList := []any{}
	if v2Match(nodes, s.host.GUID, s.host.NodeID, s.host.Hostname) {
		nodeList = append(nodeList, s.v2NodeEntry(received))
		inScope, selected := query.MatcherV2(scope), query.MatcherV2(sel)
		for _, name := range ix.contexts {
			if !inScope(name) || !selected(name) {
				continue
			}
			if after != 0 || before != 0 {
				var last int64
				for _, c := range ix.byContext[name] {
					last = max(last, s.chartLast(c.ID))
				}
				if (after != 0 && last < after) || (before != 0 && first > before) {
					continue
				}
			}
			cs[name] = s.contextV2(ix.byContext[name], opt, now)
		}
	}
	return writeJSON(ctx, map[string]any{
		"api": 2, "nodes": nodeList, "contexts": cs, "versions": s.v2Versions(),
		"agents": []any{s.v2Agent(received)}, "timings": cloudTimings(received),
	})
}

// v2Window reads the after and before of the v2 listings (contexts,
// alert_transitions): unix seconds, or negative seconds counting back
// from now; 0 for a bound not given or given as 0 (Netdata's unset
// bound, not "now").
func v2Window(ctx *fasthttp.RequestCtx, now int64) (after, before int64, err error) {
	for _, x := range []struct {
		k string
		v *int64
	}{{"after", &after}, {"before", &before}} {
		if v, ok := arg(ctx, x.k); ok && v != "" {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, 0, httpx.BadRequest("%s must be unix seconds or a negative number of seconds, got %q", x.k, trimArg(v))
			}
			if n < 0 && n >= -query.RelativeMax {
				n += now
			}
			*x.v = n
		}
	}
	return after, before, nil
}

// searchV2 is /api/v2|v3/q: Netdata's full-text search. Each matching
// context is listed as contexts lists it (family, units, priority,
// first_entry, last_entry, live) plus match, what matched first in
// Netdata's order: HOST (this node's hostname, machine GUID or node id:
// every context), CONTEXT (id or family), TITLE, UNITS, then per
// instance INSTANCE (id or name), DIMENSION (id or name), LABEL (key or
// value or key:value), ALERT (name), ALERT_INFO. q is Netdata's search
// pattern (query.CompileSearch: case-insensitive, ',' or '|' between
// words, a plain word matches inside a string, '*' globs, '!' excludes,
// the first matching word decides for each string searched); no q (or
// "*") lists every context with match NONE, as Netdata's does.
func (s *Server) searchV2(ctx *fasthttp.RequestCtx, ver int) error {
	received := time.Now()
	q, _ := arg(ctx, "q")
	q = strings.TrimSpace(q)
	if len(q) > maxAIQuery {
		return httpx.BadRequest("q is longer than %d bytes", maxAIQuery)
	}
	limit := 0
	for _, k := range []string{"limit", "cardinality_limit"} {
		if l, ok := arg(ctx, k); ok && l != "" {
			n, err := strconv.Atoi(l)
			if err != nil || n <= 0 {
				return httpx.BadRequest("%s must be a positive integer, got %q", k, trimArg(l))
			}
			limit = n
		}
	}
	pat := query.CompileSearch(q)
	strs, chars := 0, 0
	has := func(v string) bool { strs++; return pat.Match(v) }
	hasChar := func(v string) bool { chars++; return pat.Match(v) }
	// label is Netdata's label search: each label's key, value and
	// key:value; a negative word matching any of them rules every label
	// out, a positive one (with no negative) is a LABEL match.
	label := func(ls []query.Label) bool {
		pos := false
		for _, l := range ls {
			for _, v := range [...]string{l.Key, l.Value, l.Key + ":" + l.Value} {
				chars++
				switch pat.Test(v) {
				case query.SearchNegative:
					return false
				case query.SearchPositive:
					pos = true
				}
			}
		}
		return pos
	}
	ix := s.index2()
	now := s.now().Unix()
	opt := contextOptions(ctx, "priorities", "retention", "liveness", "family", "units")
	alertsOf := map[string][]health.Alert{}
	for _, a := range s.alerts() {
		alertsOf[a.Chart] = append(alertsOf[a.Chart], a)
	}
	host := ""
	if pat == nil {
		host = "NONE"
	} else if has(s.host.Hostname) || hasChar(s.host.GUID) || (s.host.NodeID != "" && hasChar(s.host.NodeID)) {
		host = "HOST"
	}
	// match is what matched first in one context, "" for nothing.
	match := func(name string, charts []*store.ChartDef) string {
		c0 := charts[0]
		switch {
		case has(name) || has(c0.Family):
			return "CONTEXT"
		case has(c0.Title):
			return "TITLE"
		case has(c0.Units):
			return "UNITS"
		}
		for _, c := range charts {
			if has(c.ID) || (c.Name != c.ID && has(c.Name)) {
				return "INSTANCE"
			}
			for _, d := range c.Dims {
				if has(d.ID) || (d.Name != "" && d.Name != d.ID && has(d.Name)) {
					return "DIMENSION"
				}
			}
			if label(instanceLabels(c)) {
				return "LABEL"
			}
			for _, a := range alertsOf[c.ID] {
				if has(a.Name) {
					return "ALERT"
				}
				if has(a.Info) {
					return "ALERT_INFO"
				}
			}
		}
		return ""
	}
	// limit lists the first matching contexts; __truncated__ counts
	// the matching ones left out.
	cs := map[string]any{}
	matched := 0
	for _, name := range ix.contexts {
		m := host
		if m == "" {
			if m = match(name, ix.byContext[name]); m == "" {
				continue
			}
		}
		matched++
		if limit > 0 && len(cs) >= limit {
			continue
		}
		o := s.contextV2(ix.byContext[name], opt, now)
		o["match"] = m
		cs[name] = o
	}
	if returned := len(cs); matched > returned {
		cs["__truncated__"] = map[string]any{"total_contexts": matched, "returned": returned, "remaining": matched - returned}
	}
	return writeJSON(ctx, map[string]any{
		"api": 2, "nodes": []any{s.v2NodeEntry(received)}, "contexts": cs,
		"searches": map[string]any{"strings": strs, "char": chars, "total": strs + chars},
		"versions": s.v2Versions(), "agents": []any{s.v2Agent(received)}, "timings": cloudTimings(received),
	})
}

// alertKeys are the short and long member names of the v2 alert answers
// (Netdata's json-keys).
type alertKeys struct {
	ati, ni, gi, name, summary, critical, warning, clear, errorK, instances, nodes, configs  string
	contexts, classes, components, types, recipients, context, instID, instName, status      string
	family, trID, trValue, trTime, configHash, source, recipient, typ, component, class, val string
	valTime                                                                                  string
}

var (
	alertShort = alertKeys{"ati", "ni", "gi", "nm", "sum", "cr", "wr", "cl", "er", "in", "nd", "cfg",
		"ctx", "cls", "cp", "ty", "to", "ctx", "ch", "ch_n", "st",
		"fami", "tr_i", "tr_v", "tr_t", "cfg", "src", "to", "tp", "cm", "cl", "v", "t"}
	alertLong = alertKeys{"alerts_array_index_id", "nodes_array_index", "global_id", "alert", "summary", "critical", "warning", "clear", "error",
		"instances_count", "nodes_count", "configurations_count",
		"contexts", "classifications", "components", "types", "recipients", "context", "instance_id", "instance", "status",
		"family", "last_transition_id", "last_transition_value", "last_transition_timestamp", "config_hash_id", "source", "recipients",
		"type", "component", "classification", "last_updated_value", "last_updated_timestamp"}
)

// alertsV2 is /api/v2|v3/alerts: nodes, the per-name summary ("alerts",
// options=summary) and the running instances ("alert_instances",
// options=instances and/or values). Without options both are given; a
// request that names options gets exactly those, as from Netdata.
func (s *Server) alertsV2(ctx *fasthttp.RequestCtx, ver int) error {
	received := time.Now()
	opt := contextOptions(ctx)
	if !opt["summary"] && !opt["instances"] && !opt["values"] {
		// Netdata's default: the per-name summary only.
		opt["summary"] = true
	}
	K := &alertShort
	if opt["long-json-keys"] || opt["long-keys"] {
		K = &alertLong
	}
	statusSel, _ := arg(ctx, "status")
	nameSel, _ := arg(ctx, "alert")
	scope, _ := arg(ctx, "scope_contexts")
	sel, _ := arg(ctx, "contexts")
	var list []health.Alert
	inScope, selected, named := query.MatcherV2(scope), query.MatcherV2(sel), query.MatcherV2(nameSel)
	for _, a := range s.alerts() {
		if !inScope(a.Context) || !selected(a.Context) || !named(a.Name) {
			continue
		}
		if !alertStatusWanted(statusSel, a.Status) {
			continue
		}
		list = append(list, a)
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	out := map[string]any{"api": 2, "nodes": []any{s.v2NodeEntry(received)}}
	ati := map[string]int{}
	var names []string
	for _, a := range list {
		if _, ok := ati[a.Name]; !ok {
			ati[a.Name] = len(names)
			names = append(names, a.Name)
		}
	}
	if opt["summary"] {
		sum := []any{}
		for _, n := range names {
			var cr, wr, cl, er, inst int
			var ctxs, cls, cps, tys []string
			cfgs := map[string]bool{}
			var summary string
			for _, a := range list {
				if a.Name != n {
					continue
				}
				inst++
				switch a.Status {
				case health.StatusCritical:
					cr++
				case health.StatusWarning:
					wr++
				case health.StatusClear:
					cl++
				default:
					er++
				}
				cfgs[configHashID(a)] = true
				summary = a.Info
				for _, x := range []struct {
					dst *[]string
					v   string
				}{{&ctxs, a.Context}, {&cls, a.Class}, {&cps, a.Component}, {&tys, a.Type}} {
					if !containsString(*x.dst, x.v) {
						*x.dst = append(*x.dst, x.v)
					}
				}
			}
			sum = append(sum, map[string]any{
				K.ati: ati[n], K.ni: []int{0}, K.name: n, K.summary: summary,
				K.critical: cr, K.warning: wr, K.clear: cl, K.errorK: er,
				K.instances: inst, K.nodes: 1, K.configs: len(cfgs),
				K.contexts: ctxs, K.classes: cls, K.components: cps, K.types: tys, K.recipients: []string{"root"},
			})
		}
		out["alerts"] = sum
	}
	if opt["instances"] || opt["values"] {
		last := s.lastTransitions()
		inst := []any{}
		for _, a := range list {
			e := map[string]any{K.ni: 0, K.name: a.Name, K.instID: a.Chart, K.instName: a.Chart}
			if opt["summary"] {
				e[K.ati] = ati[a.Name]
			}
			if opt["instances"] {
				tr := last[a.ID]
				e[K.gi] = tr.UniqueID
				e[K.context] = a.Context
				e[K.status] = string(a.Status)
				e[K.family] = a.Family
				e["info"] = a.Info
				e[K.summary] = a.Info
				e["units"] = a.Units
				e[K.trID] = uuidFrom([]byte("transition\x00" + strconv.FormatUint(tr.UniqueID, 10) + "\x00" + a.Name + "\x00" + a.Chart))
				e[K.trValue] = nullFloat(tr.NewValue)
				e[K.trTime] = a.LastStatusChange
				e[K.configHash] = configHashID(a)
				e[K.source] = "built-in@peerdns/agent/health"
				e[K.recipient] = "root"
				e[K.typ] = a.Type
				e[K.component] = a.Component
				e[K.class] = a.Class
			}
			if opt["values"] {
				e[K.val] = nullFloat(a.Value)
				e[K.valTime] = a.LastUpdated
			}
			inst = append(inst, e)
		}
		out["alert_instances"] = inst
	}
	out["versions"] = s.v2Versions()
	out["timings"] = cloudTimings(received)
	return writeJSON(ctx, out)
}

// alertStatusWanted reads the status selector (Netdata's: raised, active,
// clear, warning, critical, ... '|' or ',' separated; empty: all).
func alertStatusWanted(sel string, st health.Status) bool {
	if strings.TrimSpace(sel) == "" {
		return true
	}
	for _, w := range strings.FieldsFunc(strings.ToLower(sel), func(r rune) bool { return r == ',' || r == '|' || r == ' ' }) {
		switch w {
		case "all":
			return true
		case "raised", "active":
			if raised(st) {
				return true
			}
		case "clear":
			if st == health.StatusClear {
				return true
			}
		case "warning":
			if st == health.StatusWarning {
				return true
			}
		case "critical":
			if st == health.StatusCritical {
				return true
			}
		case "uninitialized":
			if st == health.StatusUninitialized {
				return true
			}
		case "undefined":
			if st == health.StatusUndefined {
				return true
			}
		}
	}
	return false
}

// lastTransitions is each alert's newest transition.
func (s *Server) lastTransitions() map[uint32]health.Transition {
	out := map[uint32]health.Transition{}
	for _, t := range s.transitions(0) {
		if t.UniqueID >= out[t.AlertID].UniqueID {
			out[t.AlertID] = t
		}
	}
	return out
}

// transitionFacets are Netdata's alert transition facets, in its order.
var transitionFacets = []struct{ id, name string }{
	{"f_status", "Alert Status"}, {"f_type", "Alert Type"}, {"f_role", "Recipient Role"},
	{"f_class", "Alert Class"}, {"f_component", "Alert Component"}, {"f_node", "Alert Node"},
	{"f_alert", "Alert Name"}, {"f_instance", "Instance Name"}, {"f_context", "Context"},
}

// alertTransitionsV2 is /api/v2|v3/alert_transitions: an object with the
// facets (counts of each value, filtered by f_* arguments), the
// transitions (newest first, at most last=, default 1, up to 1000) and
// the items counts. after and before keep the transitions of that
// window, as Netdata's query of its transitions table does. old's
// duration and raised_duration are alarm_log's duration and
// non_clear_duration (logChains).
func (s *Server) alertTransitionsV2(ctx *fasthttp.RequestCtx, ver int) error {
	received := time.Now()
	after, before, err := v2Window(ctx, s.now().Unix())
	if err != nil {
		return err
	}
	last := 1
	if l, ok := arg(ctx, "last"); ok && l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 {
			return httpx.BadRequest("last must be a positive integer, got %q", trimArg(l))
		}
		last = min(n, 1000)
	}
	var anchor uint64
	if a, ok := arg(ctx, "anchor_gi"); ok && a != "" {
		n, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			return httpx.BadRequest("anchor_gi must be a transition's global id, got %q", trimArg(a))
		}
		anchor = n
	}
	ctxSel, _ := arg(ctx, "context")
	if ctxSel == "" {
		ctxSel, _ = arg(ctx, "contexts")
	}
	nameSel, _ := arg(ctx, "alert")
	alerts := map[uint32]health.Alert{}
	for _, a := range s.alerts() {
		alerts[a.ID] = a
	}
	facetVal := func(t health.Transition, f string) string {
		a := alerts[t.AlertID]
		switch f {
		case "f_status":
			return string(t.NewStatus)
		case "f_type":
			return a.Type
		case "f_role":
			return "root"
		case "f_class":
			return a.Class
		case "f_component":
			return a.Component
		case "f_node":
			return s.host.GUID
		case "f_alert":
			return t.Name
		case "f_instance":
			return t.Chart
		}
		return t.Context
	}
	filters := map[string]string{}
	for _, f := range transitionFacets {
		if v, _ := arg(ctx, f.id); v != "" {
			filters[f.id] = v
		}
	}
	all := s.transitions(0)
	chains := logChains(all)
	durOf := map[uint64]logChain{}
	counts := map[string]map[string]int{}
	order := map[string][]string{}
	var matched []health.Transition
	evaluated := 0
	ctxMatch, nameMatch := query.MatcherV2(ctxSel), query.MatcherV2(nameSel)
	for i, t := range all {
		evaluated++
		if !ctxMatch(t.Context) || !nameMatch(t.Name) {
			continue
		}
		if anchor > 0 && t.UniqueID >= anchor {
			continue
		}
		if after != 0 && t.When < after || before != 0 && t.When > before {
			continue
		}
		ok := true
		for f, v := range filters {
			if !v2MatchWeb(v, facetVal(t, f)) {
				ok = false
			}
		}
		for _, f := range transitionFacets {
			v := facetVal(t, f.id)
			if counts[f.id] == nil {
				counts[f.id] = map[string]int{}
			}
			if _, seen := counts[f.id][v]; !seen {
				order[f.id] = append(order[f.id], v)
			}
			if ok {
				counts[f.id][v]++
			} else if _, seen := counts[f.id][v]; !seen {
				counts[f.id][v] = 0
			}
		}
		if ok {
			matched = append(matched, t)
			durOf[t.UniqueID] = chains[i]
		}
	}
	sort.SliceStable(matched, func(i, j int) bool { return matched[i].UniqueID > matched[j].UniqueID })
	ret := matched
	if len(ret) > last {
		ret = ret[:last]
	}
	facets := []any{}
	for i, f := range transitionFacets {
		opts := []any{}
		for _, v := range order[f.id] {
			name := v
			if f.id == "f_node" {
				name = s.host.Hostname
			}
			opts = append(opts, map[string]any{"id": v, "name": name, "count": counts[f.id][v]})
		}
		facets = append(facets, map[string]any{"id": f.id, "name": f.name, "order": i + 1, "options": opts})
	}
	trans := []any{}
	for _, t := range ret {
		a := alerts[t.AlertID]
		trans = append(trans, map[string]any{
			"gi": t.UniqueID, "alert": t.Name,
			"transition_id": uuidFrom([]byte("transition\x00" + strconv.FormatUint(t.UniqueID, 10) + "\x00" + t.Name + "\x00" + t.Chart)),
			"machine_guid":  s.host.GUID, "node_id": s.host.NodeID, "config_hash_id": configHashID(a),
			"hostname": s.host.Hostname, "instance": t.Chart, "instance_n": t.Chart, "context": t.Context,
			"component": a.Component, "classification": a.Class, "type": a.Type,
			"when": t.When, "info": t.Info, "summary": t.Info, "units": t.Units,
			"new":          map[string]any{"status": string(t.NewStatus), "value": nullFloat(t.NewValue)},
			"old":          map[string]any{"status": string(t.OldStatus), "value": nullFloat(t.OldValue), "duration": durOf[t.UniqueID].duration, "raised_duration": durOf[t.UniqueID].nonClear},
			"notification": map[string]any{"when": 0, "delay": 0, "delay_up_to_time": t.When, "exec": "", "exec_code": 0, "to": "root"},
		})
	}
	return writeJSON(ctx, map[string]any{
		"api": 2, "facets": facets, "transitions": trans,
		"items":   map[string]any{"evaluated": evaluated, "matched": len(matched), "returned": len(ret), "max_to_return": last, "before": 0, "after": len(matched) - len(ret)},
		"timings": cloudTimings(received),
	})
}

// v2MatchWeb matches a facet filter (Netdata's web separators: '|', ','
// or space between exact values).
func v2MatchWeb(pattern, v string) bool {
	for _, w := range strings.FieldsFunc(pattern, func(r rune) bool { return r == ',' || r == '|' || r == ' ' }) {
		if w == v {
			return true
		}
	}
	return false
}

// alertConfigV2 is /api/v2|v3/alert_config?config=<config_hash_id>: the
// configuration an alert runs with, as Netdata describes it. No config is
// a 400; one no running alert has is a 404.
func (s *Server) alertConfigV2(ctx *fasthttp.RequestCtx, ver int) error {
	id, _ := arg(ctx, "config")
	if id == "" {
		id, _ = arg(ctx, "config_hash_id")
	}
	if strings.TrimSpace(id) == "" {
		return httpx.BadRequest("A config= with an alert's config_hash_id is required.")
	}
	for _, a := range s.alerts() {
		if configHashID(a) != id {
			continue
		}
		value := map[string]any{"units": a.Units, "update_every": a.UpdateEvery}
		if a.LookupMethod != "" {
			value["db"] = map[string]any{
				"after": a.LookupAfter, "before": 0, "time_group_condition": "", "time_group_value": nullFloat(math.NaN()),
				"dims_group": "sum", "data_source": "samples", "method": a.LookupMethod, "dimensions": a.LookupDimensions,
				"options": strings.FieldsFunc(a.LookupOptions, func(r rune) bool { return r == ',' || r == '|' || r == ' ' }),
			}
		}
		if a.Calc != "" {
			value["calc"] = a.Calc
		}
		return writeJSON(ctx, map[string]any{
			"config_hash_id": id,
			"selectors":      map[string]any{"type": "template", "on": a.Context, "families": "*", "host_labels": "*", "chart_labels": "*"},
			"value":          value,
			"status":         map[string]any{"warn": a.Warn, "crit": a.Crit},
			"notification":   map[string]any{"type": "agent", "exec": nil, "to": "root", "delay": "", "repeat": "", "options": ""},
			"class":          a.Class, "component": a.Component, "type": a.Type, "info": a.Info, "summary": a.Info,
		})
	}
	return httpx.Errorf(fasthttp.StatusNotFound, "Alert config is not found: %s", trimArg(id))
}
