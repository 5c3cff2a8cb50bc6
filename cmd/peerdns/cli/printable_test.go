package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fasthttp/websocket"

	"peerdns/internal/testutil"
)

// A node whose messages carry terminal control sequences or are cut in
// the middle of a character: the one stderr line is still one line of
// valid UTF-8 with no control character, whatever the node sent.
func TestNodeMessagesArePrintable(t *testing.T) {
	const hostile = "boom\x1b[2J\x1b]0;owned\x07\u009b31m\u202etxt.exe\x00end"
	long := "x" + strings.Repeat("é", 200) // cut at 300 bytes: in the middle of a character
	up := websocket.Upgrader{}
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "peerdns")
		switch {
		case r.URL.Path == "/ws":
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			_, _, _ = c.ReadMessage() // the subscription
			_ = c.WriteJSON(map[string]string{"type": "error", "message": hostile})
			_, _, _ = c.ReadMessage()
		case strings.HasPrefix(r.URL.Path, "/api/logs/"):
			_, _ = w.Write([]byte(`{"channel":"core","lines":[]}`))
		case r.URL.Path == "/api/status":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(long))
		default:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(hostile))
		}
	}))
	defer node.Close()
	addr := strings.TrimPrefix(node.URL, "http://")
	for _, args := range [][]string{{"status"}, {"domains"}, {"domains", "add", "x.p2p", hashA}, {"records"}, {"logs", "-f"}} {
		r := runCLI(context.Background(), addr, args...)
		line := strings.TrimSuffix(r.stderr, "\n")
		bad := strings.ContainsFunc(line, func(c rune) bool { return c < ' ' || c >= 0x7f && c < 0xa0 || c == '\u202e' })
		if r.code != ExitRefused || strings.Contains(line, "\n") || !utf8.ValidString(line) || strings.ContainsRune(line, utf8.RuneError) || bad {
			t.Errorf("peerdns %s: exit %d, stderr %q; want exit 3 and one printable line", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

// Node data with tabs, line breaks and escape sequences (a TXT record's
// text may hold any) stays in its cell: one row per record, no control
// character reaches the terminal.
func TestTablesArePrintable(t *testing.T) {
	n := startNode(t)
	addr := n.AdminAddr()
	c := newClient(addr, 5*time.Second)
	if err := c.post("/api/add-local-dns", map[string]any{"name": "t.home", "type": "TXT", "ttl": 60, "data": "a\tb\nc\x1b[2J\u202e"}, nil); err != nil {
		t.Fatal(err)
	}
	r := cli(t, addr, 0, "records")
	rows := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	bad := strings.ContainsFunc(r.stdout, func(c rune) bool { return c != '\n' && !unicode.IsPrint(c) })
	if len(rows) != 2 || bad {
		t.Errorf("peerdns records printed %d rows (want the header and one), control characters %v:\n%q", len(rows), bad, r.stdout)
	}
}

// Something answering on the admin port with log lines and metrics that
// carry terminal control sequences: `logs`, `logs -f` and `metrics`
// print them with the sequences escaped, one line of output per line of
// the node's.
func TestLogsAndMetricsArePrintable(t *testing.T) {
	const hostile = "boom\x1b[2J\x1b]0;owned\x07\u009b31m\u202etxt\rend"
	up := websocket.Upgrader{}
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "peerdns")
		switch {
		case r.URL.Path == "/ws":
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			_, _, _ = c.ReadMessage() // the subscription
			_ = c.WriteJSON(map[string]any{"type": "log-snapshot", "channel": "core", "lines": []string{hostile}})
			_ = c.WriteJSON(map[string]any{"type": "file-log", "channel": "core", "message": hostile})
			_, _, _ = c.ReadMessage()
		case strings.HasPrefix(r.URL.Path, "/api/logs/"):
			_ = json.NewEncoder(w).Encode(map[string]any{"channel": "core", "lines": []string{hostile}})
		case r.URL.Path == "/metrics":
			fmt.Fprintf(w, "# HELP m_total %s\n# TYPE m_total counter\nm_total{l=\"%s\"} 1\n", hostile, hostile)
		}
	}))
	defer node.Close()
	addr := strings.TrimPrefix(node.URL, "http://")
	bad := func(s string) bool {
		return strings.ContainsFunc(s, func(c rune) bool { return c != '\n' && !unicode.IsPrint(c) })
	}
	for _, tt := range []struct {
		args  []string
		lines int
	}{{[]string{"logs"}, 1}, {[]string{"metrics"}, 3}, {[]string{"metrics", "m_"}, 3}} {
		r := runCLI(context.Background(), addr, tt.args...)
		if r.code != ExitOK || bad(r.stdout) || strings.Count(r.stdout, "\n") != tt.lines {
			t.Errorf("peerdns %s: exit %d, stdout %q; want exit 0 and %d printable lines", strings.Join(tt.args, " "), r.code, r.stdout, tt.lines)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut testutil.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, "logs", []string{"-f", "--lines", "1"}, func(string) string { return addr }, &out, &errOut)
	}()
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := strings.Count(out.String(), "\n"); n < 2 {
			return fmt.Errorf("%d of 2 lines so far: %q", n, out.String())
		}
		return nil
	})
	cancel()
	<-done
	if s := out.String(); bad(s) || strings.Count(s, "\n") != 2 {
		t.Errorf("peerdns logs -f printed %q; want 2 printable lines", s)
	}
}
