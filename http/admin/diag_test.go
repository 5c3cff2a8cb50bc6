package admin

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/router"

	"peerdns/internal/testutil"
)

// A streamed ping that runs longer than the server's write timeout
// still reaches its "complete" line: the timeout bounds each line's
// write, not the whole stream (ping -c 20 runs ~20 s, traceroute up to
// 60 s, the server's write timeout is 15 s).
func TestStreamedDiagnosticOutlivesWriteTimeout(t *testing.T) {
	if _, err := exec.LookPath("ping"); err != nil {
		t.Skip("ping not installed (apt-get install iputils-ping)")
	}
	ping := diagServer(t, 500*time.Millisecond) // ping -c 3 takes 2 s
	resp := ping(`{"target":"127.0.0.1","count":3,"stream":true}`)
	defer resp.Body.Close()
	body, readErr := io.ReadAll(resp.Body)
	var last map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		last = nil
		_ = json.Unmarshal(sc.Bytes(), &last)
	}
	if resp.StatusCode != 200 || readErr != nil || last["type"] != "complete" || last["success"] != true {
		t.Fatalf("stream: %d, read error %v, last line %v; body:\n%s", resp.StatusCode, readErr, last, body)
	}
}

// At most maxDiagnostics ping and traceroute runs go at once: one more
// while they run is a 503 naming the limit, and starts no process.
func TestDiagnosticsRunAtMostMaxAtOnce(t *testing.T) {
	if _, err := exec.LookPath("ping"); err != nil {
		t.Skip("ping not installed (apt-get install iputils-ping)")
	}
	post := diagServer(t, 0)
	for range maxDiagnostics {
		resp := post(`{"target":"127.0.0.1","count":20,"stream":true}`)
		// Leaving closes the connection: the next line's write fails and
		// the ping is killed.
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if resp.StatusCode != 200 || err != nil {
			t.Fatalf("streamed ping: %d, first line %q, %v", resp.StatusCode, line, err)
		}
	}
	resp := post(`{"target":"127.0.0.1","count":1}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "diagnostics") {
		t.Fatalf("ping beyond %d running: %d %s; want 503", maxDiagnostics, resp.StatusCode, body)
	}
}

// diagServer serves the diagnostics endpoints (with writeTimeout when
// not 0) on 127.0.0.1 and returns a function that POSTs a JSON body to
// its ping endpoint.
func diagServer(t *testing.T, writeTimeout time.Duration) func(body string) *http.Response {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	s := New(Deps{Log: quiet, Register: []func(*router.Router){func(r *router.Router) { RegisterDiagnostics(r, quiet, nil) }}})
	if writeTimeout > 0 {
		s.srv.WriteTimeout = writeTimeout
	}
	addr := serveServer(t, s)
	return func(body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("POST", "http://"+addr+"/api/diagnostics/ping", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := testutil.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
}
