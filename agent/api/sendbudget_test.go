package api

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// TestSendBudget: a client that asks for a large answer and never reads
// it holds that answer in the agent's memory until WriteTimeout; past the
// send budget other large answers are 503 (small ones are still served),
// and once the reader that held it is gone they are answered again.
func TestSendBudget(t *testing.T) {
	const settle = 60 * time.Second
	// The stuck answer is held until the test lets it go, whatever the
	// tests' pace (answers take seconds to build under the race detector).
	env := newTestEnv(t, func(o *Options) { o.sendBudget, o.writeTimeout = 1<<20, 10*time.Minute })
	// A chart big enough that its answer (over 12 MB) cannot all wait in
	// the sockets' buffers (up to 4 MB each way, autotuned).
	addChart(t, env, "big.chart", 1500, 1200, func(ts int64, d int) float64 { return float64(ts%1000) + float64(d)/7 })
	const bigPath = "/api/v1/data?chart=big.chart&after=-1200&points=1200"
	r := env.get(t, bigPath)
	if r.status != 200 || len(r.body) < 12<<20 {
		t.Fatalf("big answer: %d, %d bytes", r.status, len(r.body))
	}
	// Another large answer (counted against the budget), quicker to
	// build; asked for uncompressed (gzipped, it would be under
	// sendBudgetMin and not counted).
	const largePath = "/api/v1/data?chart=big.chart&after=-60&points=60"
	identity := map[string]string{"Accept-Encoding": "identity"}
	large := func(n int) resp { return env.do(t, "GET", largePath+"&n="+strconv.Itoa(n), identity) }
	if r := large(1); r.status != 200 || len(r.body) < sendBudgetMin {
		t.Fatalf("large answer: %d, %d bytes, want at least %d", r.status, len(r.body), sendBudgetMin)
	}

	// A client that asks and never reads.
	addr := strings.TrimPrefix(env.url, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := fmt.Fprintf(c, "GET %s&stuck=1 HTTP/1.1\r\nHost: %s\r\n\r\n", bigPath, addr); err != nil {
		t.Fatal(err)
	}
	// Its answer is held before another large one is asked for (asked
	// at once, the other could take the budget first). The big answer
	// takes seconds to build under the race detector (3-5 s here alone,
	// more beside the rest of the suite): the bounds are for a hang.
	testutil.Eventually(t, settle, func() error {
		env.srv.sends.mu.Lock()
		defer env.srv.sends.mu.Unlock()
		if env.srv.sends.total == 0 {
			return errors.New("the stuck reader's answer is not held yet")
		}
		return nil
	})
	testutil.Eventually(t, settle, func() error {
		if r := large(2); r.status != 503 {
			return fmt.Errorf("large answer while another waits for its reader: %d, want 503", r.status)
		}
		return nil
	})
	if r := env.get(t, "/api/v1/info"); r.status != 200 {
		t.Errorf("small answer while the budget is spent: %d", r.status)
	}
	r = large(3)
	if r.header.Get("Retry-After") == "" || r.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("503 headers: %v", r.header)
	}
	// The reader goes away: its answer is freed and large answers are
	// served again.
	c.Close()
	testutil.Eventually(t, settle, func() error {
		if r := large(4); r.status != 200 {
			return fmt.Errorf("large answer after the stuck reader left: %d", r.status)
		}
		return nil
	})
	// The last answer's hold is given back once its write has returned,
	// which may come a moment after its client read the last byte.
	testutil.Eventually(t, settle, func() error {
		env.srv.sends.mu.Lock()
		defer env.srv.sends.mu.Unlock()
		if held, total := len(env.srv.sends.held), env.srv.sends.total; held != 0 || total != 0 {
			return fmt.Errorf("budget after every answer was written: %d connections, %d bytes held", held, total)
		}
		return nil
	})
}

// TestRenderSlots: answers are computed a few at a time; a request that
// finds every slot taken waits, and past renderWait is a 503 with
// Retry-After and the CORS header; once a slot is free it is answered.
func TestRenderSlots(t *testing.T) {
	env := newTestEnv(t, func(o *Options) { o.renderWait = 20 * time.Millisecond })
	if n := cap(env.srv.render); n < 4 {
		t.Fatalf("%d render slots, want at least 4", n)
	}
	for i := 0; i < cap(env.srv.render); i++ {
		env.srv.render <- struct{}{}
	}
	r := env.get(t, "/api/v1/info")
	if r.status != 503 || r.header.Get("Retry-After") == "" || r.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("every slot taken: %d %v %s", r.status, r.header, r.body)
	}
	<-env.srv.render
	if r := env.get(t, "/api/v1/info"); r.status != 200 {
		t.Errorf("a slot free: %d", r.status)
	}
	for i := 1; i < cap(env.srv.render); i++ {
		<-env.srv.render
	}
	// Every request gives its slot back, errors too.
	for _, p := range []string{"/api/v1/info", "/api/v1/nope", "/api/v1/data", "/api/v1/data?chart=system.cpu&after=-10"} {
		env.get(t, p)
	}
	if n := len(env.srv.render); n != 0 {
		t.Errorf("%d render slots still taken after every answer", n)
	}
}
