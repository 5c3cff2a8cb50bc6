package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// `peerdns invite` against a node that answers garbage or an error full
// of control characters: exit 1 and one short printable line on
// stderr, nothing on stdout.
func TestInviteNodeGarbage(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		body   string
	}{
		{"error with controls and lines", 500, "boom\x1b[2J\nsecond line\r\n\x1b]0;owned\x07"},
		{"error cut in a character", 500, "x" + strings.Repeat("é", 400)},
		{"binary answer", 200, "\x00\xff\x1b[31m" + strings.Repeat("garbage ", 100000)},
		{"invite with controls", 200, `{"invite":"\u001b[2J","expiresAt":1}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Server", "peerdns")
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer node.Close()
			var out, errOut strings.Builder
			code := run([]string{"invite", "--admin-addr", strings.TrimPrefix(node.URL, "http://")}, func(string) string { return "" }, &out, &errOut)
			line := strings.TrimSuffix(errOut.String(), "\n")
			bad := strings.ContainsFunc(line, func(c rune) bool { return c < ' ' || c == 0x7f }) || !utf8.ValidString(line) ||
				utf8.ValidString(tt.body) && strings.ContainsRune(line, utf8.RuneError) // a cut inside a character
			if code != 1 || out.Len() != 0 || strings.Contains(line, "\n") || bad || len(line) > 400 {
				t.Fatalf("invite: exit %d, stdout %q, stderr %q (%d bytes); want exit 1 and one short printable line", code, out.String(), trim(line), len(line))
			}
		})
	}
}

func trim(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return s
}
