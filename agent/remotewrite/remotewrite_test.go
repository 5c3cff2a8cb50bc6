package remotewrite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"peerdns/agent/remotewrite"
	"peerdns/agent/store"
	"peerdns/internal/testutil"
)

// startPrometheus runs a real Prometheus with its remote-write receiver
// on addr and waits until it is ready.
func startPrometheus(t *testing.T, addr string) {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not installed (apt-get install prometheus): needed to check remote-write against a real receiver")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 1m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--web.enable-remote-write-receiver", "--log.level=warn")
	cmd.Stderr = &testutil.LogBuffer{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	testutil.Eventually(t, 30*time.Second, func() error {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("ready: %s", resp.Status)
		}
		return nil
	})
}

func newStore(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Register(&store.ChartDef{ID: "system.load", Context: "system.load", Units: "load", Family: "load",
		Dims: []store.DimDef{{ID: "load1"}, {ID: "load5"}}}); err != nil {
		t.Fatal(err)
	}
	return db
}

// query returns the value of one instant query's single result.
func query(addr, q string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("%v: %s", err, b)
	}
	if len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("%d results: %s", len(r.Data.Result), b)
	}
	var v float64
	_, err = fmt.Sscan(r.Data.Result[0].Value[1].(string), &v)
	return v, err
}

func TestRemoteWriteIntoPrometheus(t *testing.T) {
	addr := testutil.FreeTCPAddr(t)
	db := newStore(t)
	w, err := remotewrite.New(remotewrite.Config{
		URL:          "http://" + addr + "/api/v1/write",
		Sources:      func() []remotewrite.Source { return []remotewrite.Source{{Instance: "host-a", DB: db}} },
		Interval:     20 * time.Millisecond,
		QueueBatches: 3,
		BatchSamples: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix() - 280
	appendUpTo := func(to int64) {
		for ; now <= to; now++ {
			if err := db.Append("system.load", now, []float64{float64(now % 100), 5}); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendUpTo(now) // the first point: the writer starts after it
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// The receiver is down: the queue fills, later batches are dropped
	// and counted, memory stays bounded.
	testutil.Eventually(t, 10*time.Second, func() error {
		appendUpTo(min(now, time.Now().Unix()-100)) // one more second per poll, never ahead of the clock
		if w.Dropped.Load() == 0 || w.Retries.Load() == 0 {
			return fmt.Errorf("dropped %d retries %d", w.Dropped.Load(), w.Retries.Load())
		}
		return nil
	})
	if q := w.Queued(); q > 3 {
		t.Fatalf("queue holds %d batches, cap 3", q)
	}
	// It comes up: the writer recovers and the newest points land.
	startPrometheus(t, addr)
	// Points keep coming, one second per poll up to the clock, so each
	// collection queues a few batches and none is dropped now.
	testutil.Eventually(t, 30*time.Second, func() error {
		appendUpTo(min(now, time.Now().Unix()))
		want := float64((now - 1) % 100)
		v, err := query(addr, `netdata_system_load_load_average{instance="host-a",dimension="load1",chart="system.load"}`)
		if err != nil {
			return fmt.Errorf("%v (writer %v)", err, w.Status())
		}
		if v != want {
			return fmt.Errorf("load1 = %v, want %v (writer %v)", v, want, w.Status())
		}
		return nil
	})
	v, err := query(addr, `count_over_time(netdata_system_load_load_average{dimension="load5"}[10m])`)
	if err != nil || v < 2 {
		t.Errorf("load5 samples in Prometheus: %v %v, want several", v, err)
	}
	if w.Sent.Load() == 0 {
		t.Error("nothing counted as sent")
	}
}

// startWriter makes a store with one point and a writer to url that collects
// once (its interval is an hour), started, and stopped at the test's end.
func startWriter(t *testing.T, url string) *remotewrite.Writer {
	t.Helper()
	w, _, _ := runWriter(t, url, time.Now().Unix()-10)
	return w
}

// runWriter runs a writer to url over a store holding system.load's two
// dimensions at the second first, collecting once an hour; stop ends
// its Run and waits for it (also at the test's end).
func runWriter(t *testing.T, url string, first int64) (w *remotewrite.Writer, db *store.DB, stop func()) {
	t.Helper()
	db = newStore(t)
	if err := db.Append("system.load", first, []float64{1, 2}); err != nil {
		t.Fatal(err)
	}
	w, err := remotewrite.New(remotewrite.Config{
		URL:      url,
		Sources:  func() []remotewrite.Source { return []remotewrite.Source{{Instance: "host-a", DB: db}} },
		Interval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return w, db, stop
}

// A receiver that answers 429 or 503 with Retry-After gets the batch
// again no sooner than it asked, not at the writer's own backoff.
func TestRetryAfter(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			var mu sync.Mutex
			var times []time.Time
			srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				mu.Lock()
				times = append(times, time.Now())
				n := len(times)
				mu.Unlock()
				if n == 1 {
					rw.Header().Set("Retry-After", "1")
					rw.WriteHeader(status)
					return
				}
				rw.WriteHeader(http.StatusNoContent)
			}))
			t.Cleanup(srv.Close)
			w := startWriter(t, srv.URL)
			testutil.Eventually(t, 10*time.Second, func() error {
				if w.Sent.Load() != 2 {
					return fmt.Errorf("writer %v", w.Status())
				}
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			if len(times) != 2 {
				t.Fatalf("%d requests, want 2", len(times))
			}
			if gap := times[1].Sub(times[0]); gap < 900*time.Millisecond {
				t.Fatalf("retried after %v, the receiver asked for 1s", gap)
			}
		})
	}
}

// An agent that stops sends, before Run returns, the points written
// since its last collection: the last seconds before a planned stop
// reach the receiver.
func TestRunSendsTheLastPointsWhenItStops(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rw.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	now := time.Now().Unix() - 10
	w, db, stop := runWriter(t, srv.URL, now)
	testutil.Eventually(t, 10*time.Second, func() error {
		if w.Sent.Load() != 2 {
			return fmt.Errorf("writer %v", w.Status())
		}
		return nil
	})
	for i := int64(1); i <= 3; i++ {
		if err := db.Append("system.load", now+i, []float64{1, 2}); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if got := w.Sent.Load(); got != 8 {
		t.Fatalf("%d samples sent, want 8 (2 dimensions, 4 seconds): %v", got, w.Status())
	}
}
