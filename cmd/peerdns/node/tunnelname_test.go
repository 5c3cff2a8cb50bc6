package node

import (
	"strings"
	"testing"

	"peerdns/messages"
)

// A tunnel server's name is a label for listings: at most 128 bytes of
// printable text. A 4 MiB name was stored and sent in every listing; a
// line break or an escape sequence went to every panel and terminal.
func TestTunnelNameIsALabel(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	for _, tt := range []struct{ name, body, msg string }{
		{"long", `{"name":"` + strings.Repeat("n", 129) + `","port":8080}`, "longer than 128"},
		{"line break", `{"name":"a\nb","port":8080}`, `'\n'`},
		{"escape", `{"name":"a\u001b[2Jb","port":8080}`, `'\x1b'`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := call(t, "POST", base+"/api/tunnel-create", tt.body)
			if code != 500 || !strings.Contains(body, tt.msg) {
				t.Fatalf("tunnel-create %s = %d %q, want 500 naming %s", tt.name, code, body, tt.msg)
			}
		})
	}
	mustJSON(t, "POST", base+"/api/tunnel-create", `{"name":"Web server ünd API `+strings.Repeat("x", 100)+`","port":8080}`, 200, nil)
	var ss []messages.TunnelServer
	mustJSON(t, "GET", base+"/api/tunnel-servers", "", 200, &ss)
	if len(ss) != 1 {
		t.Fatalf("servers = %+v, want the one with a valid name", ss)
	}
}
