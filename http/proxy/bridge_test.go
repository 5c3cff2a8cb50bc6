package proxy

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

	"peerdns/http/admin"
)

// adminDiagEdge is an edge whose admin domain (admin.p2p) is the admin
// API with its diagnostics (ping, traceroute), and clients of it over
// HTTP/2 and HTTP/3.
func adminDiagEdge(t *testing.T) (h2, h3 *http.Client) {
	t.Helper()
	if _, err := exec.LookPath("ping"); err != nil {
		t.Skip("ping not installed (apt-get install iputils-ping)")
	}
	quiet := slog.New(slog.DiscardHandler)
	adm := admin.New(admin.Deps{Log: quiet, AdminDomain: "admin.p2p",
		Register: []func(*router.Router){func(r *router.Router) { admin.RegisterDiagnostics(r, quiet, nil) }}})
	e := startTestEdge(t, nil, Deps{Admin: adm.Handler()})
	return e.c, &http.Client{Timeout: 10 * time.Second, Transport: e.h3(t, "admin.p2p")}
}

// A streamed diagnostic (the panel's ping) asked of the admin domain
// over HTTP/2 or HTTP/3 runs to its "complete" line: the handler sets
// its connection's write deadline before each line, and the connection
// fastBridge gave it was fasthttp's stand-in, which panicked there (in
// the body writer's goroutine: the whole node went down).
func TestEdgeBridgedStreamedDiagnostic(t *testing.T) {
	h2, h3 := adminDiagEdge(t)
	for proto, c := range map[string]*http.Client{"HTTP/2": h2, "HTTP/3": h3} {
		resp, err := c.Post("https://admin.p2p/api/diagnostics/ping", "application/json",
			strings.NewReader(`{"target":"127.0.0.1","count":1,"stream":true}`))
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		var last map[string]any
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			last = nil
			_ = json.Unmarshal(sc.Bytes(), &last)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || sc.Err() != nil || last["type"] != "complete" || last["success"] != true {
			t.Fatalf("%s: %d %v, last line %v", proto, resp.StatusCode, sc.Err(), last)
		}
	}
}

// A streamed diagnostic's lines reach an HTTP/2 or HTTP/3 client as the
// tool prints them, not all at its end: its first line comes before its
// "complete" line was written (ping -c 2 runs a second).
func TestEdgeBridgedStreamFlowsAsItComes(t *testing.T) {
	h2, h3 := adminDiagEdge(t)
	for proto, c := range map[string]*http.Client{"HTTP/2": h2, "HTTP/3": h3} {
		resp, err := c.Post("https://admin.p2p/api/diagnostics/ping", "application/json",
			strings.NewReader(`{"target":"127.0.0.1","count":2,"stream":true}`))
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		sc := bufio.NewScanner(resp.Body)
		if !sc.Scan() {
			t.Fatalf("%s: %d, no line: %v", proto, resp.StatusCode, sc.Err())
		}
		first := time.Now().UnixMilli()
		var last map[string]any
		for sc.Scan() {
			last = nil
			_ = json.Unmarshal(sc.Bytes(), &last)
		}
		resp.Body.Close()
		written, _ := last["timestamp"].(float64)
		if last["type"] != "complete" || int64(written) <= first {
			t.Fatalf("%s: the first line came at %d, the complete line %v was written at %d", proto, first, last, int64(written))
		}
	}
}
