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
	quiet := slog.New(slog.DiscardHandler)
	s := New(Deps{Log: quiet, Register: []func(*router.Router){func(r *router.Router) { RegisterDiagnostics(r, quiet, nil) }}})
	s.srv.WriteTimeout = 500 * time.Millisecond // ping -c 3 takes 2 s
	addr := serveServer(t, s)

	req, err := http.NewRequest("POST", "http://"+addr+"/api/diagnostics/ping", strings.NewReader(`{"target":"127.0.0.1","count":3,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := testutil.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
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
