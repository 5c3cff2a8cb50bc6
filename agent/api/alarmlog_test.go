package api

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"peerdns/agent/health"
)

// TestAlarmLogDurations: an alarm_log entry's duration is how long its
// alert had been in old_status, and non_clear_duration how long it had
// been raised without a break, as Netdata's log counts them (its
// reference log: an UNINITIALIZED→UNDEFINED entry 65 s after the alert
// was created has duration 65). An SRE reads the CLEAR entry to learn how
// long the alert it clears was raised.
func TestAlarmLogDurations(t *testing.T) {
	env := newLogTestEnv(t)
	type entry struct {
		UniqueID         uint64 `json:"unique_id"`
		Duration         int64  `json:"duration"`
		NonClearDuration int64  `json:"non_clear_duration"`
	}
	want := []entry{{15, 300, 400}, {14, 450, 0}, {13, 100, 100}, {12, 400, 0}, {11, 0, 0}, {10, 0, 0}}
	for _, c := range []struct {
		path string
		want []entry
	}{{"/api/v1/alarm_log", want}, {"/api/v1/alarm_log?after=14", want[:1]}} {
		r := env.get(t, c.path)
		if r.status != 200 {
			t.Fatalf("GET %s = %d %s", c.path, r.status, r.body)
		}
		var got []entry
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(c.want) {
			t.Fatalf("GET %s: %+v, want %+v", c.path, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("GET %s entry %d = %+v, want %+v", c.path, i, got[i], c.want[i])
			}
		}
	}
}

// newLogTestEnv serves two alerts' transitions: 10min_cpu_usage (id 1)
// CLEAR, WARNING, CRITICAL, CLEAR and 10min_cpu_iowait (id 2) CLEAR,
// WARNING, interleaved (unique ids 10 to 15).
func newLogTestEnv(t *testing.T) *testEnv {
	return newTestEnv(t, func(o *Options) {
		now := o.Now().Unix()
		tr := func(uid uint64, id uint32, name string, ago int64, from, to health.Status) health.Transition {
			return health.Transition{UniqueID: uid, AlertID: id, Name: name, Chart: "system.cpu", Context: "system.cpu",
				When: now - ago, OldStatus: from, NewStatus: to, OldValue: math.NaN(), NewValue: 1, Units: "%"}
		}
		o.Health = &fixedAlerts{trans: []health.Transition{
			tr(10, 1, "10min_cpu_usage", 1000, health.StatusUninitialized, health.StatusClear),
			tr(11, 2, "10min_cpu_iowait", 900, health.StatusUninitialized, health.StatusClear),
			tr(12, 1, "10min_cpu_usage", 600, health.StatusClear, health.StatusWarning),
			tr(13, 1, "10min_cpu_usage", 500, health.StatusWarning, health.StatusCritical),
			tr(14, 2, "10min_cpu_iowait", 450, health.StatusClear, health.StatusWarning),
			tr(15, 1, "10min_cpu_usage", 200, health.StatusCritical, health.StatusClear),
		}}
	})
}

// TestAlarmLogLinks: each alarm_log entry names the entry of its alert
// it follows (updates_id) and, once superseded, the one that followed it
// (updated_by_id, with updated true), as Netdata's log links them (its
// reference log: every entry an alert's newer entry follows is updated,
// the newest is not), so a script keeping only the current entries
// (updated false) sees each alert once.
func TestAlarmLogLinks(t *testing.T) {
	env := newLogTestEnv(t)
	type entry struct {
		UniqueID    uint64 `json:"unique_id"`
		Updated     bool   `json:"updated"`
		UpdatedByID uint64 `json:"updated_by_id"`
		UpdatesID   uint64 `json:"updates_id"`
	}
	want := []entry{{15, false, 0, 13}, {14, false, 0, 11}, {13, true, 15, 12}, {12, true, 13, 10}, {11, true, 14, 0}, {10, true, 12, 0}}
	for _, c := range []struct {
		path string
		want []entry
	}{{"/api/v1/alarm_log", want}, {"/api/v1/alarm_log?after=14", want[:1]}} {
		r := env.get(t, c.path)
		if r.status != 200 {
			t.Fatalf("GET %s = %d %s", c.path, r.status, r.body)
		}
		var got []entry
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(c.want) {
			t.Fatalf("GET %s: %+v, want %+v", c.path, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("GET %s entry %d = %+v, want %+v", c.path, i, got[i], c.want[i])
			}
		}
	}
}

// TestAlertTransitionsDurations: v2's alert_transitions gives each
// transition's old.duration and old.raised_duration, alarm_log's
// duration and non_clear_duration, not 0.
func TestAlertTransitionsDurations(t *testing.T) {
	var now int64
	env := newTestEnv(t, func(o *Options) {
		now = o.Now().Unix()
		tr := func(uid uint64, ago int64, from, to health.Status) health.Transition {
			return health.Transition{UniqueID: uid, AlertID: 1, Name: "10min_cpu_usage", Chart: "system.cpu", Context: "system.cpu",
				When: now - ago, OldStatus: from, NewStatus: to, OldValue: math.NaN(), NewValue: 1, Units: "%"}
		}
		o.Health = &fixedAlerts{trans: []health.Transition{
			tr(10, 1000, health.StatusUninitialized, health.StatusClear),
			tr(12, 600, health.StatusClear, health.StatusWarning),
			tr(13, 500, health.StatusWarning, health.StatusCritical),
			tr(15, 200, health.StatusCritical, health.StatusClear),
		}}
	})
	r := env.get(t, "/api/v3/alert_transitions?last=10")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var body struct {
		Transitions []struct {
			GI  uint64 `json:"gi"`
			Old struct {
				Duration       int64 `json:"duration"`
				RaisedDuration int64 `json:"raised_duration"`
			} `json:"old"`
		} `json:"transitions"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	want := map[uint64][2]int64{15: {300, 400}, 13: {100, 100}, 12: {400, 0}, 10: {0, 0}}
	if len(body.Transitions) != len(want) {
		t.Fatalf("%d transitions, want %d: %s", len(body.Transitions), len(want), r.body)
	}
	for _, tr := range body.Transitions {
		if got := [2]int64{tr.Old.Duration, tr.Old.RaisedDuration}; got != want[tr.GI] {
			t.Errorf("transition %d old duration, raised_duration = %v, want %v", tr.GI, got, want[tr.GI])
		}
	}
}

// TestAlarmsSelection: alarms and alarms_values list every alert for all
// or all=true and the raised ones otherwise, the last of all and active
// winning, as Netdata selects them: all=false (a dashboard toggle sent
// off) lists the raised alerts, not every alert.
func TestAlarmsSelection(t *testing.T) {
	env := newTestEnv(t) // three alerts, one raised
	for _, c := range []struct {
		q    string
		want int
	}{
		{"", 1}, {"?all", 3}, {"?all=true", 3}, {"?all=false", 1}, {"?all=0", 1},
		{"?active", 1}, {"?all&active", 1}, {"?active&all", 3},
	} {
		for _, p := range []string{"/api/v1/alarms", "/api/v1/alarms_values"} {
			r := env.get(t, p+c.q)
			var body struct {
				Alarms map[string]json.RawMessage `json:"alarms"`
			}
			if err := json.Unmarshal(r.body, &body); err != nil || r.status != 200 {
				t.Fatalf("GET %s%s = %d %s (%v)", p, c.q, r.status, r.body, err)
			}
			if len(body.Alarms) != c.want {
				t.Errorf("GET %s%s listed %d alarms, want %d", p, c.q, len(body.Alarms), c.want)
			}
		}
	}
}

// TestAlarmLogChart: alarm_log?chart= lists that chart's entries only,
// as Netdata's does; an SRE asking for the RAM alerts' history is not
// handed every chart's.
func TestAlarmLogChart(t *testing.T) {
	env := newTestEnv(t, func(o *Options) {
		now := o.Now().Unix()
		tr := func(uid uint64, id uint32, name, chart string) health.Transition {
			return health.Transition{UniqueID: uid, AlertID: id, Name: name, Chart: chart, Context: chart,
				When: now - 100 + int64(uid), OldStatus: health.StatusUninitialized, NewStatus: health.StatusClear,
				OldValue: math.NaN(), NewValue: 1, Units: "%"}
		}
		o.Health = &fixedAlerts{trans: []health.Transition{
			tr(1, 1, "10min_cpu_usage", "system.cpu"), tr(2, 2, "ram_in_use", "system.ram"), tr(3, 3, "10min_cpu_iowait", "system.cpu"),
		}}
	})
	for _, c := range []struct {
		q    string
		want []uint64
	}{{"", []uint64{3, 2, 1}}, {"?chart=system.cpu", []uint64{3, 1}}, {"?chart=system.ram&after=1", []uint64{2}}, {"?chart=no.such", nil}} {
		r := env.get(t, "/api/v1/alarm_log"+c.q)
		var got []struct {
			UniqueID uint64 `json:"unique_id"`
			Chart    string `json:"chart"`
		}
		if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 {
			t.Fatalf("alarm_log%s = %d %s (%v)", c.q, r.status, r.body, err)
		}
		var ids []uint64
		for _, e := range got {
			ids = append(ids, e.UniqueID)
		}
		if fmt.Sprint(ids) != fmt.Sprint(c.want) {
			t.Errorf("alarm_log%s = %v, want %v", c.q, ids, c.want)
		}
	}
}
