package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fasthttp/websocket"
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
