package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"go.uber.org/goleak"

	"peerdns/internal/testutil"
)

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("AGENT_REST", "")
	c, err := ConfigFromEnv("/data")
	if err != nil {
		t.Fatal(err)
	}
	if c.Dir != "/data/agent" || !c.REST || c.Addr() != "127.0.0.1:18888" || c.CORS != "*" || c.Parent ||
		c.ExportDir != "/data/agent/exports" || !c.Journal || !c.ReleaseStartupPages || !c.Slabinfo {
		t.Fatalf("defaults = %+v", c)
	}
	t.Setenv("AGENT_REST", "0")
	t.Setenv("AGENT_REST_HOST", "0.0.0.0")
	t.Setenv("AGENT_REST_PORT", "0")
	t.Setenv("AGENT_REST_CORS", "https://dash.example")
	t.Setenv("AGENT_PARENT", "1")
	t.Setenv("AGENT_EXPORT_DIR", "/srv/exports")
	t.Setenv("AGENT_JOURNAL", "0")
	t.Setenv("AGENT_RELEASE_STARTUP_PAGES", "0")
	t.Setenv("AGENT_SLABINFO", "0")
	c, err = ConfigFromEnv("/data")
	if err != nil {
		t.Fatal(err)
	}
	if c.REST || c.Addr() != "0.0.0.0:0" || c.CORS != "https://dash.example" || !c.Parent || c.ExportDir != "/srv/exports" || c.Journal || c.ReleaseStartupPages || c.Slabinfo {
		t.Fatalf("from env = %+v", c)
	}
	for k, v := range map[string]string{"AGENT_REST_PORT": "70000", "AGENT_REST": "maybe", "AGENT_PARENT": "2", "AGENT_REST_HOST": "a b",
		"AGENT_PEER_ADDR": "nope", "AGENT_PARENT_DEST": "abc@127.0.0.1:1", "AGENT_REMOTE_WRITE_URL": "ftp://x", "AGENT_RELEASE_STARTUP_PAGES": "sometimes", "AGENT_SLABINFO": "2"} {
		t.Run(k, func(t *testing.T) {
			t.Setenv(k, v)
			if _, err := ConfigFromEnv("/data"); err == nil || !strings.Contains(err.Error(), k) {
				t.Fatalf("%s=%s: err = %v", k, v, err)
			}
		})
	}
}

// running is one agent.Run in the background.
type running struct {
	logs   *testutil.LogBuffer
	cancel context.CancelFunc
	done   chan error
}

// startAgent runs the agent with cfg until the test ends (or stop).
func startAgent(t *testing.T, ctx context.Context, cfg Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	r := &running{logs: &testutil.LogBuffer{}, cancel: cancel, done: make(chan error, 1)}
	log := slog.New(slog.NewTextHandler(r.logs, nil))
	go func() { r.done <- Run(ctx, cfg, log) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// stop cancels Run and requires it to return nil promptly.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("Run did not stop; logs:\n%s", r.logs.String())
	}
}

// waitLog waits for a log line matching re and returns its first group.
func (r *running) waitLog(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	var m []string
	testutil.Eventually(t, 10*time.Second, func() error {
		if m = re.FindStringSubmatch(r.logs.String()); m == nil {
			return fmt.Errorf("no %q line in the log: %q", re, r.logs.String())
		}
		return nil
	})
	if len(m) > 1 {
		return m[1]
	}
	return m[0]
}

var (
	listeningRE = regexp.MustCompile(`agent listening on (127\.0\.0\.1:\d+)`)
	disabledRE  = regexp.MustCompile(`agent REST API disabled`)
)

// testConfig is the agent's configuration for data dir dir from the
// environment the test set, on a loopback address.
func testConfig(t *testing.T, dir string) Config {
	t.Helper()
	t.Setenv("AGENT_REST_HOST", "127.0.0.1")
	t.Setenv("AGENT_EXPORT_DIR", filepath.Join(dir, "exports"))
	t.Setenv("AGENT_PEER_ADDR", "127.0.0.1:0")
	cfg, err := ConfigFromEnv(dir)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	r, err := testutil.Client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return r.StatusCode, r.Header, b
}

// TestRunServesRealHost runs the whole agent (store, real collectors,
// real alert engine, API on a free loopback port), reads every main path
// while it collects, then stops it and checks the data dir.
func TestRunServesRealHost(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AGENT_REST_PORT", "0")
	cfg := testConfig(t, dir)
	a := startAgent(t, context.Background(), cfg)
	base := "http://" + a.waitLog(t, listeningRE)
	// Wait for a few seconds of collected system.cpu points.
	testutil.Eventually(t, 15*time.Second, func() error {
		code, _, b := get(t, base+"/api/v1/data?chart=system.cpu&after=-10&points=10&format=array")
		var arr []any
		if code != 200 || json.Unmarshal(b, &arr) != nil || len(arr) < 3 {
			return fmt.Errorf("system.cpu not collected: %d %s", code, b)
		}
		return nil
	})
	for _, p := range []string{
		"/", "/api/v3/info", "/api/v1/charts", "/api/v3/contexts", "/api/v1/chart?chart=system.cpu",
		"/api/v3/data?chart=system.load&options=jsonwrap", "/api/v3/alerts", "/api/v3/alert_transitions",
		"/api/v3/settings", "/api/v3/db", "/health", "/api/v3/nodes", "/api/v3/export",
		"/api/v3/processes?limit=5", "/api/v3/logs?source=audit", "/api/v3/ai/snapshot",
	} {
		code, _, b := get(t, base+p)
		if code != 200 || !json.Valid(b) {
			t.Errorf("GET %s = %d %.200s", p, code, b)
		}
	}
	// The anomaly detector runs after each collection: its Netdata charts
	// exist and count the host's dimensions (none trained yet: that takes
	// 15 minutes of history).
	testutil.Eventually(t, 10*time.Second, func() error {
		var charts struct {
			Charts map[string]struct{ Context, Name string } `json:"charts"`
		}
		_, _, b := get(t, base+"/api/v1/charts")
		if err := json.Unmarshal(b, &charts); err != nil {
			return err
		}
		for id, c := range charts.Charts {
			if c.Context != "anomaly_detection.dimensions" {
				continue
			}
			code, _, b := get(t, base+"/api/v1/data?chart="+id+"&after=-3&points=1&format=json&options=objectrows")
			if code != 200 || !bytes.Contains(b, []byte(`"total":`)) || bytes.Contains(b, []byte(`"total":0`)) || bytes.Contains(b, []byte(`"total":null`)) {
				return fmt.Errorf("%s (%s): %d %s", id, c.Name, code, b)
			}
			return nil
		}
		return fmt.Errorf("no anomaly_detection.dimensions chart in %d charts", len(charts.Charts))
	})
	for _, p := range []string{"/api/v1/weights?method=volume&after=-5", "/api/v3/weights?method=ks2&after=-5", "/api/v2/weights"} {
		code, _, b := get(t, base+p)
		if code != 200 || !json.Valid(b) || !bytes.Contains(b, []byte(`"results"`)) {
			t.Errorf("GET %s = %d %.300s", p, code, b)
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
	_, _, b = get(t, base+"/api/v1/alerts")
	if err := json.Unmarshal(b, &alerts); err != nil || len(alerts.Alarms) == 0 {
		t.Errorf("no alerts from the engine: %v %s", err, b)
	}
	known := map[string]bool{"CLEAR": true, "WARNING": true, "CRITICAL": true, "UNDEFINED": true, "UNINITIALIZED": true}
	for name, al := range alerts.Alarms {
		if !known[al.Status] {
			t.Errorf("alert %s has status %q, want a Netdata status", name, al.Status)
		}
	}

	a.stop(t)
	if _, err := os.Stat(filepath.Join(dir, "agent", "identity.key")); err != nil {
		t.Errorf("identity key: %v", err)
	}
	if _, err := testutil.Client.Get(base + "/"); err == nil {
		t.Errorf("API still answering after stop")
	}
}

// freePort returns a loopback TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

// TestRunRESTDisabled configures the API on a known free port with
// AGENT_REST=0 and, once the agent runs, shows that a dial to that port
// is refused. The same run with AGENT_REST=1 is the control: there the
// dial connects, so the check can tell the two apart.
func TestRunRESTDisabled(t *testing.T) {
	for _, rest := range []bool{false, true} {
		t.Run("REST="+strconv.FormatBool(rest), func(t *testing.T) {
			port := freePort(t)
			t.Setenv("AGENT_REST", map[bool]string{false: "0", true: "1"}[rest])
			t.Setenv("AGENT_REST_PORT", strconv.Itoa(port))
			cfg := testConfig(t, t.TempDir())
			if cfg.REST != rest || cfg.Port != port {
				t.Fatalf("config = %+v", cfg)
			}
			a := startAgent(t, context.Background(), cfg)
			if rest {
				a.waitLog(t, listeningRE)
			} else {
				a.waitLog(t, disabledRE)
			}
			conn, err := net.DialTimeout("tcp", cfg.Addr(), 5*time.Second)
			switch {
			case rest && err != nil:
				t.Fatalf("REST on: dial %s: %v", cfg.Addr(), err)
			case rest:
				conn.Close()
			case err == nil:
				conn.Close()
				t.Fatalf("REST off: something listens on %s", cfg.Addr())
			case !errors.Is(err, syscall.ECONNREFUSED):
				t.Fatalf("REST off: dial %s = %v, want connection refused", cfg.Addr(), err)
			}
			a.stop(t)
		})
	}
}

// fasthttpDate is fasthttp's process-wide Date-header ticker: the first
// server that answers starts it and it never stops, by design. It is the
// only goroutine the agent may leave behind.
var fasthttpDate = goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1")

// lateExits are library goroutines that notice a stop only when their
// ticker or sleep fires: buntdb's background manager (the health
// transitions file; it returns on the first one-second tick after Close)
// and fasthttp's idle-worker cleaner (it checks for Stop between sleeps of
// the server's MaxIdleWorkerDuration, 10 s by default). They do exit;
// waitLateExits waits until they have, so that NoLeaks, with its short
// grace period, checks everything else instead of ignoring them.
var lateExits = []string{
	"github.com/tidwall/buntdb.(*DB).backgroundManager(",
	"github.com/valyala/fasthttp.(*workerPool).Start.func2(",
}

func waitLateExits(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	testutil.Eventually(t, 20*time.Second, func() error {
		all := string(buf[:runtime.Stack(buf, true)])
		for _, f := range lateExits {
			if strings.Contains(all, f) {
				return fmt.Errorf("%s) still running", f)
			}
		}
		return nil
	})
}

// TestRunStopsCleanly cancels Run before it starts and while it serves
// a client that holds a keep-alive connection: Run returns nil, the
// server closes the connection, and no goroutine is left behind.
func TestRunStopsCleanly(t *testing.T) {
	testutil.NoLeaks(t, fasthttpDate)
	t.Cleanup(func() { waitLateExits(t) }) // runs before NoLeaks' check
	t.Run("cancelled before start", func(t *testing.T) {
		for _, host := range []string{"127.0.0.1", "localhost"} {
			t.Setenv("AGENT_REST_PORT", "0")
			cfg := testConfig(t, t.TempDir())
			cfg.Host = host
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			a := startAgent(t, ctx, cfg)
			a.stop(t)
		}
	})
	t.Run("cancelled while serving", func(t *testing.T) {
		t.Setenv("AGENT_REST_PORT", "0")
		a := startAgent(t, context.Background(), testConfig(t, t.TempDir()))
		addr := a.waitLog(t, listeningRE)
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(15 * time.Second)); err != nil {
			t.Fatal(err)
		}
		// One request on a keep-alive connection, left open.
		if _, err := fmt.Fprintf(conn, "GET /api/v1/info HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("info = %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
		}
		a.stop(t)
		if n, err := br.ReadByte(); err != io.EOF {
			t.Errorf("connection after stop: read %q, %v; want EOF (closed by the server)", n, err)
		}
	})
}
