package health

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"peerdns/agent/store"
	"peerdns/agent/store/storetest"
	"peerdns/internal/testutil"
)

const base = int64(1_700_000_000)

func newTestEngine(t *testing.T, db *store.DB, dir string) *Engine {
	t.Helper()
	e, err := New(db, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func register(t *testing.T, db *store.DB, id, context, family string, dims ...string) {
	t.Helper()
	c := &store.ChartDef{ID: id, Context: context, Family: family}
	for _, d := range dims {
		c.Dims = append(c.Dims, store.DimDef{ID: d})
	}
	if err := db.Register(c); err != nil {
		t.Fatal(err)
	}
}

func appendAt(t *testing.T, db *store.DB, id string, ts int64, v ...float64) {
	t.Helper()
	if err := db.Append(id, ts, v); err != nil {
		t.Fatal(err)
	}
}

func alert(t *testing.T, e *Engine, name, chart string) Alert {
	t.Helper()
	for _, a := range e.Alerts() {
		if a.Name == name && a.Chart == chart {
			return a
		}
	}
	t.Fatalf("no alert %s on %s in %+v", name, chart, e.Alerts())
	return Alert{}
}

func ruleByName(name string) *rule {
	for _, r := range builtinRules() {
		if r.name == name {
			return r
		}
	}
	panic(name)
}

func TestRuleStatusHysteresis(t *testing.T) {
	cpu := ruleByName("10min_cpu_usage") // warn 85 up / 75 down, crit 95 up / 85 down
	avail := ruleByName("ram_available") // below: warn 10 / 15, crit 5 / 10
	tests := []struct {
		name string
		r    *rule
		cur  Status
		v    float64
		want Status
	}{
		{"cpu clear stays below warn-up", cpu, StatusClear, 84, StatusClear},
		{"cpu clear to warning above 85", cpu, StatusClear, 86, StatusWarning},
		{"cpu warning holds above 75", cpu, StatusWarning, 76, StatusWarning},
		{"cpu warning clears below 75", cpu, StatusWarning, 74, StatusClear},
		{"cpu clear straight to critical", cpu, StatusClear, 96, StatusCritical},
		{"cpu warning to critical only above 95", cpu, StatusWarning, 90, StatusWarning},
		{"cpu critical holds above 85", cpu, StatusCritical, 86, StatusCritical},
		{"cpu critical down to warning", cpu, StatusCritical, 84, StatusWarning},
		{"cpu critical down to clear", cpu, StatusCritical, 70, StatusClear},
		{"cpu uninitialized", cpu, StatusUninitialized, 50, StatusClear},
		{"cpu nan undefined", cpu, StatusClear, math.NaN(), StatusUndefined},
		{"avail clear stays above 10", avail, StatusClear, 12, StatusClear},
		{"avail clear to warning below 10", avail, StatusClear, 9, StatusWarning},
		{"avail warning holds below 15", avail, StatusWarning, 14, StatusWarning},
		{"avail warning clears above 15", avail, StatusWarning, 16, StatusClear},
		{"avail critical below 5", avail, StatusWarning, 4, StatusCritical},
		{"avail critical holds below 10", avail, StatusCritical, 9, StatusCritical},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.status(tt.cur, tt.v); got != tt.want {
				t.Errorf("status(%s, %v) = %s, want %s", tt.cur, tt.v, got, tt.want)
			}
		})
	}
}

// setRAM appends a system.ram point where used is pct% of 1000 MiB.
func setRAM(t *testing.T, db *store.DB, ts int64, pct float64) {
	t.Helper()
	appendAt(t, db, "system.ram", ts, 1000-10*pct-50, 10*pct, 30, 20)
}

func TestRAMInUseThroughThresholds(t *testing.T) {
	db := storetest.New(t, store.Config{})
	register(t, db, "system.ram", "system.ram", "ram", "free", "used", "cached", "buffers")
	e := newTestEngine(t, db, "")
	steps := []struct {
		pct  float64
		want Status
	}{
		{50, StatusClear}, {89, StatusClear}, {91, StatusWarning}, {85, StatusWarning}, {81, StatusWarning},
		{79, StatusClear}, {99, StatusCritical}, {91, StatusCritical}, {89, StatusWarning}, {70, StatusClear},
	}
	ts := base
	for i, s := range steps {
		setRAM(t, db, ts, s.pct)
		e.Evaluate(ts)
		a := alert(t, e, "ram_in_use", "system.ram")
		if a.Status != s.want || math.Abs(a.Value-s.pct) > 1e-3 || a.LastUpdated != ts {
			t.Errorf("step %d (%v%%): status %s value %v updated %d, want %s", i, s.pct, a.Status, a.Value, a.LastUpdated, s.want)
		}
		// Between evaluations (every 10 s) nothing changes.
		setRAM(t, db, ts+5, 0)
		e.Evaluate(ts + 5)
		if b := alert(t, e, "ram_in_use", "system.ram"); b.LastUpdated != ts {
			t.Errorf("step %d: evaluated again after 5 s", i)
		}
		ts += 10
	}
	var got []string
	for _, tr := range e.Transitions(0) {
		if tr.Name == "ram_in_use" {
			got = append(got, fmt.Sprintf("%s>%s@%d", tr.OldStatus, tr.NewStatus, tr.When-base))
		}
	}
	want := "UNINITIALIZED>CLEAR@0 CLEAR>WARNING@20 WARNING>CLEAR@50 CLEAR>CRITICAL@60 CRITICAL>WARNING@80 WARNING>CLEAR@90"
	if strings.Join(got, " ") != want {
		t.Errorf("transitions = %s\nwant          %s", strings.Join(got, " "), want)
	}
	a := alert(t, e, "ram_in_use", "system.ram")
	if a.LastStatusChange != base+90 || a.Units != "%" || a.Class != "Utilization" || a.Component != "Memory" ||
		a.Warn != "$this > (($status >= $WARNING) ? (80) : (90))" || a.Crit != "$this > (($status == $CRITICAL) ? (90) : (98))" ||
		a.UpdateEvery != 10 || a.ID != alertID("ram_in_use", "system.ram") ||
		a.Calc != "$used * 100 / ($used + $cached + $free + $buffers)" || a.LookupMethod != "" {
		t.Errorf("alert = %+v", a)
	}
}

func TestCPUAverageOverTenMinutes(t *testing.T) {
	db := storetest.New(t, store.Config{})
	register(t, db, "system.cpu", "system.cpu", "cpu",
		"guest_nice", "guest", "steal", "softirq", "irq", "user", "system", "nice", "iowait", "idle")
	e := newTestEngine(t, db, "")
	// 10 minutes at user 60 + system 30 (+ iowait 5, not counted), then 5 minutes of idle.
	for ts := base; ts < base+600; ts++ {
		appendAt(t, db, "system.cpu", ts, 0, 0, 0, 0, 0, 60, 30, 0, 5, 5)
	}
	e.Evaluate(base + 599)
	a := alert(t, e, "10min_cpu_usage", "system.cpu")
	if a.Status != StatusWarning || math.Abs(a.Value-90) > 1e-3 {
		t.Errorf("after 10 busy minutes: %s %v, want WARNING 90", a.Status, a.Value)
	}
	if a.LookupDimensions != "user,system,softirq,irq,guest" || a.LookupMethod != "average" || a.LookupAfter != -600 ||
		a.LookupOptions != "unaligned" || a.Calc != "" {
		t.Errorf("lookup fields = %+v", a)
	}
	if io := alert(t, e, "10min_cpu_iowait", "system.cpu"); io.Status != StatusClear || math.Abs(io.Value-5) > 1e-3 {
		t.Errorf("iowait = %s %v, want CLEAR 5", io.Status, io.Value)
	}
	for ts := base + 600; ts < base+900; ts++ {
		appendAt(t, db, "system.cpu", ts, 0, 0, 0, 0, 0, 0, 0, 0, 0, 100)
	}
	// Half busy, half idle: 45% < 75% → clear.
	e.Evaluate(base + 899)
	if a := alert(t, e, "10min_cpu_usage", "system.cpu"); a.Status != StatusClear || math.Abs(a.Value-45) > 1e-3 {
		t.Errorf("after 5 idle minutes: %s %v, want CLEAR 45", a.Status, a.Value)
	}
}

func TestDiskSpaceLoadSwapAndUndefined(t *testing.T) {
	db := storetest.New(t, store.Config{})
	for _, m := range []struct{ id, fam string }{{"disk_space._", "/"}, {"disk_space._data", "/data"}} {
		register(t, db, m.id, "disk.space", m.fam, "avail", "used", "reserved_for_root")
	}
	register(t, db, "system.load", "system.load", "load", "load1", "load5", "load15")
	for i := 0; i < 4; i++ {
		register(t, db, fmt.Sprintf("cpu.cpu%d", i), "cpu.cpu", "utilization", "user")
	}
	register(t, db, "system.swap", "system.swap", "swap", "free", "used")
	register(t, db, "disk_inodes._", "disk.inodes", "/", "avail", "used", "reserved_for_root")
	e := newTestEngine(t, db, "")
	appendAt(t, db, "disk_inodes._", base, 10, 90, 0)    // 90%: not above warn 90 while clear
	appendAt(t, db, "disk_space._", base, 5, 95, 1)      // 95%: above warn 90, below crit 98 → warning
	appendAt(t, db, "disk_space._data", base, 60, 40, 1) // 40% → clear
	for ts := base - 59; ts <= base; ts++ {
		appendAt(t, db, "system.load", ts, 1, 2, 9) // 9 × 100 / 4 cpus = 225% > 200% → warning
	}
	e.Evaluate(base)
	checks := []struct {
		name, chart string
		status      Status
		value       float64
		info        string
	}{
		{"disk_space_usage", "disk_space._", StatusWarning, 95, "disk / space utilization"},
		{"disk_space_usage", "disk_space._data", StatusClear, 40, "disk /data space utilization"},
		{"load_average_15", "system.load", StatusWarning, 9, "system fifteen-minute load average"},
		{"load_average_5", "system.load", StatusClear, 2, "system five-minute load average"},
		{"used_swap", "system.swap", StatusUndefined, math.NaN(), "swap memory utilization"},
		{"disk_inode_usage", "disk_inodes._", StatusClear, 90, "disk / inode utilization"},
	}
	for _, c := range checks {
		a := alert(t, e, c.name, c.chart)
		if a.Status != c.status || !(a.Value == c.value || math.IsNaN(a.Value) && math.IsNaN(c.value)) || a.Info != c.info {
			t.Errorf("%s on %s = %s %v %q, want %s %v %q", c.name, c.chart, a.Status, a.Value, a.Info, c.status, c.value, c.info)
		}
	}
	if n := len(e.Alerts()); n != 7 {
		t.Errorf("%d alerts, want 7 (2 disk_space_usage, 3 load_average, used_swap, disk_inode_usage)", n)
	}
	// A chart whose last point is stale is undefined, not stuck.
	e.Evaluate(base + 120)
	if a := alert(t, e, "disk_space_usage", "disk_space._"); a.Status != StatusUndefined {
		t.Errorf("stale disk_space._ = %s, want UNDEFINED", a.Status)
	}
	as := e.Alerts()
	for i := 1; i < len(as); i++ {
		if as[i-1].Name > as[i].Name || as[i-1].Name == as[i].Name && as[i-1].Chart > as[i].Chart {
			t.Errorf("Alerts not sorted: %s/%s before %s/%s", as[i-1].Name, as[i-1].Chart, as[i].Name, as[i].Chart)
		}
	}
}

// TestRemovedChartDropsItsAlerts: mounts that come and go (a pod's
// volumes) take their disk alerts with them, so the alert list does not
// grow with every mount the host ever had, and a mount that returns
// starts afresh.
func TestRemovedChartDropsItsAlerts(t *testing.T) {
	db := storetest.New(t, store.Config{})
	e := newTestEngine(t, db, "")
	register(t, db, "disk_space._", "disk.space", "/", "avail", "used", "reserved_for_root")
	appendAt(t, db, "disk_space._", base, 60, 40, 1)
	for i := 0; i < 50; i++ {
		id := fmt.Sprintf("disk_space._pod%d", i)
		register(t, db, id, "disk.space", "/pod", "avail", "used", "reserved_for_root")
		appendAt(t, db, id, base, 5, 95, 1)
		e.Evaluate(base)
		if a := alert(t, e, "disk_space_usage", id); a.Status != StatusWarning {
			t.Fatalf("%s = %s, want WARNING", id, a.Status)
		}
		db.Remove(id)
	}
	e.Evaluate(base + 60)
	var charts []string
	for _, a := range e.Alerts() {
		charts = append(charts, a.Chart)
	}
	if len(charts) != 1 || charts[0] != "disk_space._" {
		t.Fatalf("alerts on %v, want only disk_space._", charts)
	}
	register(t, db, "disk_space._pod0", "disk.space", "/pod", "avail", "used", "reserved_for_root")
	e.Evaluate(base + 120)
	if a := alert(t, e, "disk_space_usage", "disk_space._pod0"); a.Status != StatusUndefined {
		t.Fatalf("returned mount without data = %s, want UNDEFINED", a.Status)
	}
}

func TestTransitionsPersistAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	db := storetest.New(t, store.Config{})
	register(t, db, "system.ram", "system.ram", "ram", "free", "used", "cached", "buffers")
	e, err := New(db, dir)
	if err != nil {
		t.Fatal(err)
	}
	ts := base
	for _, pct := range []float64{50, 95} { // UNINITIALIZED→CLEAR, CLEAR→WARNING
		setRAM(t, db, ts, pct)
		e.Evaluate(ts)
		ts += 10
	}
	before := e.Transitions(0)
	if len(before) != 2 {
		t.Fatalf("%d transitions before restart: %+v", len(before), before)
	}
	if !math.IsNaN(before[0].OldValue) {
		t.Errorf("first OldValue = %v, want NaN", before[0].OldValue)
	}
	if got := e.Transitions(before[0].UniqueID); len(got) != 1 || got[0] != before[1] {
		t.Errorf("Transitions(after first) = %+v", got)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e2 := newTestEngine(t, db, dir)
	after := e2.Transitions(0)
	if len(after) != len(before) {
		t.Fatalf("%d transitions after restart, want %d", len(after), len(before))
	}
	for i := range before {
		b, a := before[i], after[i]
		if !sameTransition(a, b) {
			t.Errorf("transition %d after restart = %+v, want %+v", i, a, b)
		}
	}
	// 85% is between the warn thresholds: the restored WARNING holds
	// (a fresh engine would say CLEAR), and nothing new is logged.
	setRAM(t, db, ts, 85)
	e2.Evaluate(ts)
	if a := alert(t, e2, "ram_in_use", "system.ram"); a.Status != StatusWarning || a.LastStatusChange != base+10 {
		t.Errorf("after restart at 85%%: %s changed %d, want WARNING since %d", a.Status, a.LastStatusChange, base+10)
	}
	if n := len(e2.Transitions(0)); n != 2 {
		t.Errorf("%d transitions, want 2", n)
	}
	ts += 10
	setRAM(t, db, ts, 10)
	e2.Evaluate(ts)
	all := e2.Transitions(0)
	if len(all) != 3 || all[2].UniqueID <= before[1].UniqueID || all[2].NewStatus != StatusClear {
		t.Errorf("transition after restart = %+v", all)
	}
	if err := e2.PersistErr(); err != nil {
		t.Error(err)
	}
}

func TestRunEvaluates(t *testing.T) {
	db := storetest.New(t, store.Config{})
	register(t, db, "system.ram", "system.ram", "ram", "free", "used", "cached", "buffers")
	setRAM(t, db, time.Now().Unix(), 10)
	e := newTestEngine(t, db, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	testutil.Eventually(t, 5*time.Second, func() error {
		if len(e.Transitions(0)) == 0 {
			return errors.New("Run has not evaluated the rules")
		}
		return nil
	})
	if a := alert(t, e, "ram_in_use", "system.ram"); a.Status != StatusClear {
		t.Errorf("ram_in_use = %s", a.Status)
	}
}

func FuzzDecodeTransition(f *testing.F) {
	f.Add(encodeTransition(Transition{UniqueID: 1, Name: "x", Chart: "y", OldValue: math.NaN(), NewValue: 2}))
	f.Add(`{"UniqueID":1}`)
	f.Add(`{"UniqueID":1,"Name":"a","Chart":"b","OldValue":"x"}`)
	f.Fuzz(func(t *testing.T, s string) {
		var tr Transition
		if decodeTransition(s, &tr) == nil {
			if tr.UniqueID == 0 || tr.Name == "" {
				t.Fatal("accepted an incomplete transition")
			}
			var again Transition
			if err := decodeTransition(encodeTransition(tr), &again); err != nil {
				t.Fatalf("round trip: %v", err)
			}
			if !sameTransition(again, tr) {
				t.Fatalf("round trip = %+v, want %+v", again, tr)
			}
		}
	})
}

// sameTransition is == with NaN values equal to each other.
func sameTransition(a, b Transition) bool {
	sameFloat := func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) }
	if !sameFloat(a.OldValue, b.OldValue) || !sameFloat(a.NewValue, b.NewValue) {
		return false
	}
	a.OldValue, a.NewValue, b.OldValue, b.NewValue = 0, 0, 0, 0
	return a == b
}
