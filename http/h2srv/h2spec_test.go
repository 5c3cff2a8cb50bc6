package h2srv

import (
	"io"
	"net/http"
	"testing"

	"peerdns/internal/testutil"
)

// TestH2Spec runs h2spec against the server: every case passes.
func TestH2Spec(t *testing.T) {
	ts := newTestServer(t, Config{MaxConcurrentStreams: 100}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "h2spec")
	}))
	testutil.H2Spec(t, ts.addr)
}
