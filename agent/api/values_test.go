package api

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// skewedEnv is a test env whose clock can be moved forward, to see what
// the API says once collection has stopped.
func skewedEnv(t *testing.T) (*testEnv, *atomic.Int64) {
	var skew atomic.Int64 // seconds
	env := newTestEnv(t, func(o *Options) {
		fixed := o.Now
		o.Now = func() time.Time { return fixed().Add(time.Duration(skew.Load()) * time.Second) }
	})
	return env, &skew
}

// TestCollectingFollowsTheClock: health, the node instance and contexts
// say collecting while the newest point is recent and stop saying it
// staleAfter seconds later; the node stays reachable (it answers).
func TestCollectingFollowsTheClock(t *testing.T) {
	env, skew := skewedEnv(t)
	last := float64(env.now.Unix() - 1)
	for _, c := range []struct {
		skew       int64
		collecting bool
		status     string
		code       int
	}{
		{0, true, "warning", 200}, // one alert is WARNING
		{staleAfter - 1, true, "warning", 200},
		{60, false, "stale", 503},
	} {
		skew.Store(c.skew)
		r := env.get(t, "/health")
		h := decode(t, "health", r.body).(map[string]any)
		if r.status != c.code || h["status"] != c.status || h["collecting"] != c.collecting || h["last_collected"] != last {
			t.Errorf("+%ds: /health = %d %v, want %d status %s collecting %v", c.skew, r.status, h, c.code, c.status, c.collecting)
		}
		ni := decode(t, "node_instances", env.get(t, "/api/v3/node_instances").body).(map[string]any)
		node := ni["nodes"].([]any)[0].(map[string]any)
		inst := node["instances"].([]any)[0].(map[string]any)
		if node["state"] != "reachable" || inst["collecting"] != c.collecting || inst["last_collected"] != last {
			t.Errorf("+%ds: node_instances = %v, want reachable, collecting %v", c.skew, node, c.collecting)
		}
		cx := decode(t, "context", env.get(t, "/api/v1/context?context=system.cpu&options=full").body).(map[string]any)
		flags := "ARCHIVED LIVE_RETENTION "
		if c.collecting {
			flags = "COLLECTED LIVE_RETENTION "
		}
		ch := cx["charts"].(map[string]any)["system.cpu"].(map[string]any)
		if cx["collected"] != c.collecting || cx["flags"] != flags || ch["collected"] != c.collecting || ch["flags"] != flags {
			t.Errorf("+%ds: context collected %v flags %q, chart %v %q; want %v %q", c.skew,
				cx["collected"], cx["flags"], ch["collected"], ch["flags"], c.collecting, flags)
		}
	}
}

// TestVersionsHashes: hard hashes move when definitions change, soft
// hashes when data does; none is a constant.
func TestVersionsHashes(t *testing.T) {
	env := newTestEnv(t)
	versions := func() map[string]any {
		v := decode(t, "versions", env.get(t, "/api/v1/versions").body).(map[string]any)
		return v["versions"].(map[string]any)
	}
	v0 := versions()
	if _, ok := v0["routing_hard_hash"]; ok {
		t.Errorf("routing_hard_hash listed on v1: the agent routes nothing")
	}
	// v3 writes Netdata's six hashes, routing_hard_hash its constant 1.
	v3 := decode(t, "versions", env.get(t, "/api/v3/versions").body).(map[string]any)["versions"].(map[string]any)
	if v3["routing_hard_hash"] != float64(1) || v3["contexts_hard_hash"] != v0["contexts_hard_hash"] {
		t.Errorf("v3 versions = %v", v3)
	}
	if v0["alerts_hard_hash"] != float64(2) || v0["alerts_soft_hash"] != float64(env.now.Unix()-1) {
		t.Errorf("alerts hashes = %v, want the latest transition id 2 and the newest evaluation", v0)
	}
	if v0["contexts_hard_hash"] != float64(chartsHash(env.db.Charts())) || v0["nodes_hard_hash"] == float64(0) {
		t.Errorf("hashes = %v", v0)
	}
	for _, k := range []string{"contexts_hard_hash", "nodes_hard_hash"} {
		if h := v0[k].(float64); h >= 1<<53 {
			t.Errorf("%s = %v: beyond 2^53, JavaScript cannot read it exactly", k, h)
		}
	}
	// A new point moves the soft hash only (stats are cached for a second).
	if err := env.db.Append("system.load", env.now.Unix(), []float64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 3*time.Second, func() error {
		if v := versions(); v["contexts_soft_hash"] != float64(env.now.Unix()) {
			return fmt.Errorf("contexts_soft_hash = %v after a point at %d", v["contexts_soft_hash"], env.now.Unix())
		}
		return nil
	})
	if v := versions(); v["contexts_hard_hash"] != v0["contexts_hard_hash"] || v["nodes_hard_hash"] != v0["nodes_hard_hash"] {
		t.Errorf("hard hashes moved with data: %v -> %v", v0, v)
	}
	// A new chart moves the hard hash.
	c := testCharts()[1]
	c.ID, c.Name = "system.other", "system.other"
	if err := env.db.Register(c); err != nil {
		t.Fatal(err)
	}
	if v := versions(); v["contexts_hard_hash"] == v0["contexts_hard_hash"] {
		t.Errorf("contexts_hard_hash did not move with a new chart")
	}
}

// TestNoAnomalyCounts: with no detector, the snapshot says anomalies are
// not available instead of counting zero.
func TestNoAnomalyCounts(t *testing.T) {
	env := newTestEnv(t)
	snap := decode(t, "snapshot", env.get(t, "/api/v3/ai/snapshot").body).(map[string]any)
	an, ok := snap["anomalies"].(map[string]any)
	if !ok || an["available"] != false || !strings.Contains(fmt.Sprint(an["reason"]), "no anomaly detector running") || len(an) != 2 {
		t.Errorf("anomalies = %v, want {available: false, reason}", snap["anomalies"])
	}
}

// TestChartOrder: chart objects list dimensions in chart order (hidden
// ones left out) and charts by priority, as Netdata does; encoding/json
// maps would sort them by name.
func TestChartOrder(t *testing.T) {
	env := newTestEnv(t)
	body := env.get(t, "/api/v1/chart?chart=system.cpu").body
	prev := -1
	for _, d := range []string{"guest_nice", "guest", "steal", "softirq", "irq", "user", "system", "nice", "iowait"} {
		i := bytes.Index(body, []byte(`"`+d+`": {`))
		if i <= prev {
			t.Fatalf("dimension %s out of chart order:\n%s", d, body)
		}
		prev = i
	}
	if bytes.Contains(body, []byte(`"idle"`)) {
		t.Errorf("hidden dimension idle listed")
	}
	body = env.get(t, "/api/v1/charts").body
	prev = -1
	for _, c := range env.db.Charts() {
		i := bytes.Index(body, []byte(`"`+c.ID+`": {`))
		if i <= prev {
			t.Fatalf("chart %s out of order", c.ID)
		}
		prev = i
	}
}

// TestConfigHashID: each alert's config_hash_id is derived from its rule,
// not a zero placeholder, and the alarm log uses the same one.
func TestConfigHashID(t *testing.T) {
	env := newTestEnv(t)
	al := decode(t, "alerts", env.get(t, "/api/v1/alerts").body).(map[string]any)["alarms"].(map[string]any)
	seen := map[any]string{}
	for name, a := range al {
		id := a.(map[string]any)["config_hash_id"]
		if id == "00000000-0000-0000-0000-000000000000" || id == "" {
			t.Errorf("%s: config_hash_id %v", name, id)
		}
		if other, dup := seen[id]; dup {
			t.Errorf("%s and %s share config_hash_id %v", name, other, id)
		}
		seen[id] = name
	}
	cpu := al["system.cpu.10min_cpu_usage"].(map[string]any)["config_hash_id"]
	for _, e := range decode(t, "log", env.get(t, "/api/v1/alarm_log").body).([]any) {
		if id := e.(map[string]any)["config_hash_id"]; id != cpu {
			t.Errorf("alarm_log config_hash_id %v, alarms say %v", id, cpu)
		}
	}
}
