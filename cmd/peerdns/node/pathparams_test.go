package node

import (
	"path/filepath"
	"strings"
	"testing"
)

// A path parameter means the same percent-encoded or not (RFC 3986
// §6.2.2.2), on every route: the backup and plugin routes matched the
// encoded text ("profile%2Ep2p" was an invalid plugin domain) while the
// consensus and logs routes decoded it. Decoded, the checks still
// refuse what they refused.
func TestEncodedPathParams(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	var created struct{ Path string }
	mustJSON(t, "POST", base+"/api/backups/create", "", 200, &created)
	name := filepath.Base(created.Path)
	enc := strings.NewReplacer(".", "%2E", "-", "%2d").Replace(name)
	for _, tt := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/api/plugins/profile%2Ep2p", 200},
		{"GET", "/api/plugins/%70rofile.p2p", 200},
		{"POST", "/api/plugins/profile.p2p/actions/%2e%2e", 400},
		{"POST", "/api/plugins/profile.p2p/actions/a%2Fb", 400},
		{"GET", "/api/plugins/%2e%2e", 400},
		{"GET", "/api/backups/" + enc + "/metadata", 200},
		{"DELETE", "/api/backups/%2E%2E", 400},
		{"DELETE", "/api/backups/" + enc, 200},
	} {
		if code, body := call(t, tt.method, base+tt.path, ""); code != tt.want {
			t.Errorf("%s %s = %d %s, want %d", tt.method, tt.path, code, body, tt.want)
		}
	}
}
