package api

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"peerdns/agent/logs"
)

// An explicit baseline (baseline_after, baseline_before] is the window the
// highlight is compared with, as Netdata queries it: the seconds between
// baseline_before and the highlight's after are not part of it.
func TestReviewWeightsExplicitBaseline(t *testing.T) {
	env := newTestEnv(t)
	now := env.now.Unix()
	// 10 in the baseline (now-600, now-300] and in the highlight (now-60,
	// now], 0 in the gap between them.
	addChart(t, env, "test.base", 1, 600, func(ts int64, _ int) float64 {
		if ts > now-300 && ts <= now-60 {
			return 0
		}
		return 10
	})
	path := fmt.Sprintf("/api/v3/weights?method=volume&charts=test.base&after=%d&before=%d&baseline_after=%d&baseline_before=%d",
		now-60, now, now-600, now-300)
	r := env.get(t, path)
	if r.status != 200 {
		t.Fatalf("%s = %d %s", path, r.status, r.body)
	}
	var w weightsJSON
	if err := json.Unmarshal(r.body, &w); err != nil {
		t.Fatalf("decode: %v\n%s", err, r.body)
	}
	if b := w.View.Baseline; b == nil || b.After != now-600 || b.Before != now-300 || b.Points != 300 {
		t.Errorf("view.baseline = %+v, want after %d, before %d and its 300 points", b, now-600, now-300)
	}
	for _, res := range w.Results {
		if res.ID == "test.base.d000" && res.Weight != 0 {
			t.Errorf("weight of a dimension whose highlight equals its baseline = %v, want 0 (the gap was read as baseline)", res.Weight)
		}
	}
}

// A negative number of seconds too large for a duration must not wrap
// around into the future: since=-10000000000 (317 years back) either
// answers everything or is refused naming since, never an empty page.
func TestReviewLogsHugeRelativeSince(t *testing.T) {
	env := newTestEnv(t)
	if err := env.srv.o.Audit.Record(logs.Entry{Priority: logs.PriNotice, Unit: "review", Message: "kept"}); err != nil {
		t.Fatal(err)
	}
	r := env.get(t, "/api/v3/logs?source=audit&since=-10000000000")
	switch r.status {
	case 400:
		if !strings.Contains(string(r.body), "since") {
			t.Fatalf("400 does not name since: %s", r.body)
		}
	case 200:
		var b logsBody
		if err := json.Unmarshal(r.body, &b); err != nil {
			t.Fatal(err)
		}
		if b.Count == 0 {
			t.Fatalf("since=-10000000000 answered no entries: the time wrapped around: %s", r.body)
		}
	default:
		t.Fatalf("status %d: %s", r.status, r.body)
	}
}

// A unit name with a NUL byte cannot be passed to journalctl: it is bad
// input (400 naming unit), not an internal error.
func TestReviewJournalUnitNUL(t *testing.T) {
	dir := t.TempDir()
	// A journal directory as available() sees one; journalctl is not run
	// for this request.
	if err := os.WriteFile(filepath.Join(dir, "system.journal"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env := newTestEnv(t, func(o *Options) { o.JournalDir = dir })
	r := env.get(t, "/api/v3/logs?source=journal&unit=ssh%00d")
	if r.status == 503 && strings.Contains(string(r.body), "journalctl is not installed") {
		t.Skip("no journalctl on this machine")
	}
	if r.status != 400 || !strings.Contains(string(r.body), "unit") {
		t.Fatalf("unit with a NUL byte = %d %s, want 400 naming unit", r.status, r.body)
	}
}
