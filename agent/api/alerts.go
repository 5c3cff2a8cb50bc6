package api

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"peerdns/agent/health"
	"peerdns/http/httpx"
)

// alarmJSON is Netdata's /api/v1/alarms entry (keys in Netdata's order).
type alarmJSON struct {
	ID                 uint32  `json:"id"`
	ConfigHashID       string  `json:"config_hash_id"`
	Name               string  `json:"name"`
	Chart              string  `json:"chart"`
	Family             string  `json:"family"`
	Class              string  `json:"class"`
	Component          string  `json:"component"`
	Type               string  `json:"type"`
	Active             bool    `json:"active"`
	Disabled           bool    `json:"disabled"`
	Silenced           bool    `json:"silenced"`
	Exec               string  `json:"exec"`
	Recipient          string  `json:"recipient"`
	Source             string  `json:"source"`
	Units              string  `json:"units"`
	Info               string  `json:"info"`
	Status             string  `json:"status"`
	LastStatusChange   int64   `json:"last_status_change"`
	LastUpdated        int64   `json:"last_updated"`
	NextUpdate         int64   `json:"next_update"`
	UpdateEvery        int     `json:"update_every"`
	DelayUpDuration    int     `json:"delay_up_duration"`
	DelayDownDuration  int     `json:"delay_down_duration"`
	DelayMaxDuration   int     `json:"delay_max_duration"`
	DelayMultiplier    float64 `json:"delay_multiplier"`
	Delay              int     `json:"delay"`
	DelayUpToTimestamp int64   `json:"delay_up_to_timestamp"`
	WarnRepeatEvery    string  `json:"warn_repeat_every"`
	CritRepeatEvery    string  `json:"crit_repeat_every"`
	ValueString        string  `json:"value_string"`
	LastRepeat         string  `json:"last_repeat"`
	TimesRepeat        int     `json:"times_repeat"`
	// Present for lookup rules only, as in Netdata.
	LookupDimensions *string `json:"lookup_dimensions,omitempty"`
	DBAfter          *int64  `json:"db_after,omitempty"`
	DBBefore         *int64  `json:"db_before,omitempty"`
	LookupMethod     *string `json:"lookup_method,omitempty"`
	LookupAfter      *int    `json:"lookup_after,omitempty"`
	LookupBefore     *int    `json:"lookup_before,omitempty"`
	LookupOptions    *string `json:"lookup_options,omitempty"`
	// Present for calc rules only.
	Calc       string    `json:"calc,omitempty"`
	CalcParsed string    `json:"calc_parsed,omitempty"`
	Warn       string    `json:"warn"`
	WarnParsed string    `json:"warn_parsed"`
	Crit       string    `json:"crit"`
	CritParsed string    `json:"crit_parsed"`
	Green      nullFloat `json:"green"`
	Red        nullFloat `json:"red"`
	Value      nullFloat `json:"value"`
}

// configHashID is a UUID derived from the rule behind an alert (Netdata's
// config_hash_id identifies the configuration an alert ran with): equal
// rules share it, and it changes when the rule does.
func configHashID(a health.Alert) string {
	return uuidFrom([]byte(strings.Join([]string{a.Name, a.Chart, a.Context, a.Units, a.Calc, a.Warn, a.Crit,
		a.LookupDimensions, a.LookupMethod, strconv.Itoa(a.LookupAfter), a.LookupOptions, strconv.Itoa(a.UpdateEvery)}, "\x00")))
}

func raised(st health.Status) bool {
	return st == health.StatusWarning || st == health.StatusCritical
}

func toAlarm(a health.Alert) alarmJSON {
	j := alarmJSON{
		ID: a.ID, ConfigHashID: configHashID(a), Name: a.Name, Chart: a.Chart, Family: a.Family,
		Class: a.Class, Component: a.Component, Type: a.Type, Active: true, Silenced: a.Silenced,
		Exec: "", Recipient: "", Source: "built-in@peerdns/agent/health", Units: a.Units, Info: a.Info,
		Status: string(a.Status), LastStatusChange: a.LastStatusChange, LastUpdated: a.LastUpdated,
		NextUpdate: a.LastUpdated + int64(a.UpdateEvery), UpdateEvery: a.UpdateEvery, DelayMultiplier: 1,
		DelayUpToTimestamp: a.LastStatusChange, WarnRepeatEvery: "0", CritRepeatEvery: "0",
		ValueString: formatValue(a.Value, a.Units, -1), LastRepeat: "0",
		Calc: a.Calc, CalcParsed: a.Calc, Warn: a.Warn, WarnParsed: a.Warn, Crit: a.Crit, CritParsed: a.Crit,
		Green: noValue, Red: noValue, Value: nullFloat(a.Value),
	}
	if a.LookupMethod != "" {
		dims, method, opts := a.LookupDimensions, a.LookupMethod, a.LookupOptions
		after, before := a.LookupAfter, 0
		dbBefore := a.LastUpdated
		dbAfter := dbBefore + int64(after)
		if a.LastUpdated == 0 {
			dbBefore, dbAfter = 0, 0
		}
		j.LookupDimensions, j.LookupMethod, j.LookupOptions = &dims, &method, &opts
		j.LookupAfter, j.LookupBefore, j.DBAfter, j.DBBefore = &after, &before, &dbAfter, &dbBefore
	}
	return j
}

func (s *Server) latestUniqueID() uint64 {
	t := s.transitions(0)
	if len(t) == 0 {
		return 0
	}
	return t[len(t)-1].UniqueID
}

// alarmsBody is Netdata's /api/v1/alarms: only raised alerts unless all.
func (s *Server) alarmsBody(ctx *fasthttp.RequestCtx, all bool) error {
	m := map[string]alarmJSON{}
	for _, a := range s.alerts() {
		if all || raised(a.Status) {
			m[a.Chart+"."+a.Name] = toAlarm(a)
		}
	}
	return writeJSON(ctx, map[string]any{
		"hostname":                   s.host.Hostname,
		"latest_alarm_log_unique_id": s.latestUniqueID(),
		"status":                     true,
		"now":                        s.now().Unix(),
		"alarms":                     m,
	})
}

func (s *Server) alarms(ctx *fasthttp.RequestCtx, _ int) error {
	return s.alarmsBody(ctx, selectAll(ctx))
}

// selectAll reads alarms' and alarms_values' selection as Netdata does:
// all (or all=true) lists every alert, active (or active=true) only the
// raised ones, the last of them given wins, and any other value of
// either (all=false, all=0) selects nothing, leaving the default of
// raised alerts.
func selectAll(ctx *fasthttp.RequestCtx) bool {
	all := false
	for k, v := range ctx.QueryArgs().All() {
		if len(v) > 0 && string(v) != "true" {
			continue
		}
		switch string(k) {
		case "all":
			all = true
		case "active":
			all = false
		}
	}
	return all
}

// alertsAll (v2/v3 alerts) lists every alert unless ?active is given.
func (s *Server) alertsAll(ctx *fasthttp.RequestCtx, _ int) error {
	_, active := arg(ctx, "active")
	return s.alarmsBody(ctx, !active)
}

// alarmLogEntry is Netdata's /api/v1/alarm_log entry.
type alarmLogEntry struct {
	Hostname           string    `json:"hostname"`
	UTCOffset          int       `json:"utc_offset"`
	Timezone           string    `json:"timezone"`
	UniqueID           uint64    `json:"unique_id"`
	AlarmID            uint32    `json:"alarm_id"`
	AlarmEventID       uint64    `json:"alarm_event_id"`
	ConfigHashID       string    `json:"config_hash_id"`
	Name               string    `json:"name"`
	Chart              string    `json:"chart"`
	Context            string    `json:"context"`
	Family             string    `json:"family"`
	Class              string    `json:"class"`
	Component          string    `json:"component"`
	Type               string    `json:"type"`
	Processed          bool      `json:"processed"`
	Updated            bool      `json:"updated"`
	ExecRun            int64     `json:"exec_run"`
	ExecFailed         bool      `json:"exec_failed"`
	Exec               string    `json:"exec"`
	Recipient          string    `json:"recipient"`
	ExecCode           int       `json:"exec_code"`
	Source             string    `json:"source"`
	Command            string    `json:"command"`
	Units              string    `json:"units"`
	When               int64     `json:"when"`
	Duration           int64     `json:"duration"`
	NonClearDuration   int64     `json:"non_clear_duration"`
	Status             string    `json:"status"`
	OldStatus          string    `json:"old_status"`
	Delay              int       `json:"delay"`
	DelayUpToTimestamp int64     `json:"delay_up_to_timestamp"`
	UpdatedByID        uint64    `json:"updated_by_id"`
	UpdatesID          uint64    `json:"updates_id"`
	ValueString        string    `json:"value_string"`
	OldValueString     string    `json:"old_value_string"`
	LastRepeat         string    `json:"last_repeat"`
	Silenced           string    `json:"silenced"`
	Info               string    `json:"info"`
	Value              nullFloat `json:"value"`
	OldValue           nullFloat `json:"old_value"`
}

// logChain is what Netdata's alert log derives for a transition from the
// alert's transitions before and after it: how long the alert had been
// in the transition's old status (from its transition before; 0 for an
// alert's first), how long it had been raised without a break up to it
// (so a CLEAR entry says how long the alert it clears was raised), the
// transition it follows (updates) and the one that followed it
// (updatedBy; 0 while it is the alert's newest).
type logChain struct {
	duration, nonClear int64
	updates, updatedBy uint64
}

// logChains computes a logChain for each of all (oldest first), in the
// same order.
func logChains(all []health.Transition) []logChain {
	out := make([]logChain, len(all))
	prev := map[uint32]int{} // alert → index of its newest transition so far
	for i, t := range all {
		var c logChain
		if j, ok := prev[t.AlertID]; ok {
			p := all[j]
			c.duration = t.When - p.When
			if raised(p.OldStatus) && raised(p.NewStatus) {
				c.nonClear = out[j].nonClear
			}
			c.updates = p.UniqueID
			out[j].updatedBy = t.UniqueID
		}
		if raised(t.OldStatus) {
			c.nonClear += c.duration
		}
		out[i] = c
		prev[t.AlertID] = i
	}
	return out
}

// alarmLog is Netdata's alarm_log (also v1's alert_transitions):
// newest first, only entries with unique_id > after and, given chart=,
// only that chart's (its id, as Netdata matches it). duration,
// non_clear_duration, updates_id and updated_by_id (with updated, true
// once a newer entry of the alert follows) are logChains'.
func (s *Server) alarmLog(ctx *fasthttp.RequestCtx, _ int) error {
	var after uint64
	if v, ok := arg(ctx, "after"); ok && v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return httpx.BadRequest("after must be an alarm log unique id (a non-negative integer), got %q", trimArg(v))
		}
		after = n
	}
	chart, _ := arg(ctx, "chart")
	all := s.transitions(0)
	chains := logChains(all)
	byAlert := map[uint32]health.Alert{}
	for _, a := range s.alerts() {
		byAlert[a.ID] = a
	}
	tz, off := s.host.zone()
	out := make([]alarmLogEntry, 0, len(all))
	for i, t := range all {
		if t.UniqueID <= after || chart != "" && t.Chart != chart {
			continue
		}
		a := byAlert[t.AlertID]
		out = append(out, alarmLogEntry{
			Hostname: s.host.Hostname, UTCOffset: off, Timezone: tz, UniqueID: t.UniqueID, AlarmID: t.AlertID,
			AlarmEventID: t.UniqueID, ConfigHashID: configHashID(a),
			Name: t.Name, Chart: t.Chart, Context: t.Context, Family: t.Family,
			Class: a.Class, Component: a.Component, Type: a.Type, Processed: true,
			Updated: chains[i].updatedBy != 0, UpdatedByID: chains[i].updatedBy, UpdatesID: chains[i].updates,
			Source: "built-in@peerdns/agent/health", Units: t.Units, When: t.When, Duration: chains[i].duration,
			NonClearDuration: chains[i].nonClear, Status: string(t.NewStatus), OldStatus: string(t.OldStatus),
			DelayUpToTimestamp: t.When, ValueString: formatValue(t.NewValue, t.Units, -1),
			OldValueString: formatValue(t.OldValue, t.Units, -1), LastRepeat: "0", Silenced: "false",
			Info: t.Info, Value: nullFloat(t.NewValue), OldValue: nullFloat(t.OldValue),
		})
	}
	slices.Reverse(out)
	return writeJSON(ctx, out)
}

func (s *Server) alarmsValues(ctx *fasthttp.RequestCtx, _ int) error {
	all := selectAll(ctx)
	m := map[string]any{}
	for _, a := range s.alerts() {
		if all || raised(a.Status) {
			m[a.Chart+"."+a.Name] = map[string]any{"id": a.ID, "value": nullFloat(a.Value), "last_updated": a.LastUpdated, "status": a.Status}
		}
	}
	return writeJSON(ctx, map[string]any{"hostname": s.host.Hostname, "alarms": m})
}

// alarmCount is Netdata's alarm_count: [n] alerts in the given status
// (default RAISED = WARNING or CRITICAL), optionally of some contexts:
// every context= and ctx= given, each a list separated by ',', '|' or
// spaces.
func (s *Server) alarmCount(ctx *fasthttp.RequestCtx, _ int) error {
	status := strings.ToUpper(argOr(ctx, "status", "RAISED"))
	switch status {
	case "RAISED", "CLEAR", "WARNING", "CRITICAL", "UNDEFINED", "UNINITIALIZED":
	default:
		return httpx.BadRequest("unknown status %q: use RAISED, CLEAR, WARNING, CRITICAL, UNDEFINED or UNINITIALIZED", trimArg(status))
	}
	var contexts map[string]bool
	for _, k := range []string{"context", "ctx"} {
		for _, v := range ctx.QueryArgs().PeekMulti(k) {
			for _, c := range strings.FieldsFunc(string(v), func(r rune) bool { return r == ',' || r == '|' || r == ' ' }) {
				if contexts == nil {
					contexts = map[string]bool{}
				}
				contexts[c] = true
			}
		}
	}
	n := 0
	for _, a := range s.alerts() {
		if contexts != nil && !contexts[a.Context] {
			continue
		}
		if status == "RAISED" && raised(a.Status) || string(a.Status) == status {
			n++
		}
	}
	setBody(ctx, ctJSON, []byte("["+strconv.Itoa(n)+"]"))
	return nil
}

// alertConfig lists the rules behind the alerts (one per alert here:
// rules are built in), optionally only those named by ?name= or ?config=.
func (s *Server) alertConfig(ctx *fasthttp.RequestCtx, _ int) error {
	name, _ := arg(ctx, "name")
	if name == "" {
		name, _ = arg(ctx, "config")
	}
	out := []map[string]any{}
	for _, a := range s.alerts() {
		if name != "" && a.Name != name {
			continue
		}
		out = append(out, map[string]any{
			"name": a.Name, "chart": a.Chart, "context": a.Context, "family": a.Family,
			"class": a.Class, "component": a.Component, "type": a.Type, "units": a.Units, "info": a.Info,
			"warn": a.Warn, "crit": a.Crit, "update_every": a.UpdateEvery, "source": "built-in@peerdns/agent/health",
			"calc": a.Calc, "lookup": map[string]any{"dimensions": a.LookupDimensions, "method": a.LookupMethod,
				"after": a.LookupAfter, "options": a.LookupOptions},
		})
	}
	if name != "" && len(out) == 0 {
		return httpx.Errorf(fasthttp.StatusNotFound, "Alert config is not found: %s", trimArg(name))
	}
	return writeJSON(ctx, map[string]any{"configs": out})
}

// variable is Netdata's alarm_variables for one chart: the values the
// alert expressions can use.
func (s *Server) variable(ctx *fasthttp.RequestCtx, _ int) error {
	id, _ := arg(ctx, "chart")
	if id == "" {
		return httpx.BadRequest("No chart id is given at the request.")
	}
	c, ok := s.o.DB.Chart(id)
	if !ok {
		return httpx.Errorf(fasthttp.StatusNotFound, "Chart is not found: %s", trimArg(id))
	}
	t, vals, _ := s.o.DB.Latest(c.ID)
	vars := map[string]any{
		"last_collected_t": t, "green": noValue, "red": noValue, "update_every": max(c.UpdateEvery, 1),
	}
	for _, a := range s.alerts() {
		if a.Chart == c.ID {
			vars[a.Name] = nullFloat(a.Value)
		}
	}
	for i, d := range c.Dims {
		v := math.NaN()
		if i < len(vals) {
			v = vals[i]
		}
		vars[d.Name] = nullFloat(v)
		vars[d.Name+"_last_collected_t"] = t
	}
	return writeJSON(ctx, map[string]any{
		"chart": c.ID, "chart_name": c.Name, "chart_context": c.Context, "chart_variables": vars,
		"family": c.Family, "family_variables": map[string]any{},
		"host":           s.host.Hostname,
		"host_variables": map[string]any{"active_processors": s.host.Cores, "uptime": s.now().Unix() - s.started.Unix()},
	})
}
