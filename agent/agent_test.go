package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("AGENT_REST", "")
	c, err := ConfigFromEnv("/data")
	if err != nil {
		t.Fatal(err)
	}
	if c.Dir != "/data/agent" || !c.REST || c.Addr() != "127.0.0.1:18888" || c.CORS != "*" || c.Parent ||
		c.ExportDir != "/data/agent/exports" || !c.Journal {
		t.Fatalf("defaults = %+v", c)
	}
	t.Setenv("AGENT_REST", "0")
	t.Setenv("AGENT_REST_HOST", "0.0.0.0")
	t.Setenv("AGENT_REST_PORT", "0")
	t.Setenv("AGENT_REST_CORS", "https://dash.example")
	t.Setenv("AGENT_PARENT", "1")
	t.Setenv("AGENT_EXPORT_DIR", "/srv/exports")
	t.Setenv("AGENT_JOURNAL", "0")
	c, err = ConfigFromEnv("/data")
	if err != nil {
		t.Fatal(err)
	}
	if c.REST || c.Addr() != "0.0.0.0:0" || c.CORS != "https://dash.example" || !c.Parent || c.ExportDir != "/srv/exports" || c.Journal {
		t.Fatalf("from env = %+v", c)
	}
	for k, v := range map[string]string{"AGENT_REST_PORT": "70000", "AGENT_REST": "maybe", "AGENT_PARENT": "2", "AGENT_REST_HOST": "a b"} {
		t.Run(k, func(t *testing.T) {
			t.Setenv(k, v)
			if _, err := ConfigFromEnv("/data"); err == nil || !strings.Contains(err.Error(), k) {
				t.Fatalf("%s=%s: err = %v", k, v, err)
			}
		})
	}
}

// syncBuf is a log sink the test can read while Run writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func eventually(t *testing.T, within time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for err := cond(); err != nil; err = cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not true after %v: %v", within, err)
		}
		<-tick.C
	}
}

func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, r.Header, b
}

// TestRunServesRealHost runs the whole agent (store, real collectors,
// real alert engine, API on a free loopback port), reads every main path
// while it collects, then stops it and checks the data dir.
func TestRunServesRealHost(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AGENT_REST_PORT", "0")
	t.Setenv("AGENT_REST_HOST", "127.0.0.1")
	t.Setenv("AGENT_EXPORT_DIR", filepath.Join(dir, "exports"))
	cfg, err := ConfigFromEnv(dir)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuf
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, log) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	re := regexp.MustCompile(`agent listening on (127\.0\.0\.1:\d+)`)
	var base string
	eventually(t, 10*time.Second, func() error {
		m := re.FindStringSubmatch(logs.String())
		if m == nil {
			return fmt.Errorf("no listening line in log: %q", logs.String())
		}
		base = "http://" + m[1]
		return nil
	})
	// Wait for a few seconds of collected system.cpu points.
	eventually(t, 15*time.Second, func() error {
		code, _, b := get(t, base+"/api/v1/data?chart=system.cpu&after=-10&points=10&format=array")
		var arr []any
		if code != 200 || json.Unmarshal(b, &arr) != nil || len(arr) < 3 {
			return fmt.Errorf("system.cpu not collected yet: %d %s", code, b)
		}
		return nil
	})
	for _, p := range []string{
		"/", "/api/v3/info", "/api/v1/charts", "/api/v3/contexts", "/api/v1/chart?chart=system.cpu",
		"/api/v3/data?chart=system.load&options=jsonwrap", "/api/v3/alerts", "/api/v3/alert_transitions",
		"/api/v3/settings", "/api/v3/db", "/health", "/api/v3/nodes", "/api/v3/export",
	} {
		code, _, b := get(t, base+p)
		if code != 200 || !json.Valid(b) {
			t.Errorf("GET %s = %d %.200s", p, code, b)
		}
	}
	code, h, b := get(t, base+"/api/v1/allmetrics?format=prometheus")
	if code != 200 || h.Get("Content-Type") != "text/plain; version=0.0.4" {
		t.Fatalf("prometheus: %d %s", code, h.Get("Content-Type"))
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("prometheus exposition: %v", err)
	}
	if fams["netdata_system_cpu_percentage_average"] == nil || fams["netdata_system_load_load_average"] == nil {
		t.Errorf("real host metrics missing from prometheus output")
	}
	code, _, b = get(t, base+"/api/v3/export?write=1")
	var w struct{ Written string }
	if code != 200 || json.Unmarshal(b, &w) != nil {
		t.Fatalf("export write: %d %s", code, b)
	}
	if _, err := os.Stat(w.Written); err != nil || filepath.Dir(w.Written) != cfg.ExportDir {
		t.Fatalf("export file %q: %v", w.Written, err)
	}
	var alerts struct {
		Alarms map[string]struct{ Status string } `json:"alarms"`
	}
	_, _, b = get(t, base+"/api/v3/alerts")
	if err := json.Unmarshal(b, &alerts); err != nil || len(alerts.Alarms) == 0 {
		t.Errorf("no alerts from the engine: %v %s", err, b)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v", err)
		}
		done <- nil // for the cleanup
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not stop")
	}
	if _, err := os.Stat(filepath.Join(dir, "agent", "identity.key")); err != nil {
		t.Errorf("identity key: %v", err)
	}
	if _, err := http.Get(base + "/"); err == nil {
		t.Errorf("API still answering after stop")
	}
}

func TestRunRESTDisabled(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AGENT_REST", "0")
	cfg, err := ConfigFromEnv(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, nil) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not stop")
	}
}
