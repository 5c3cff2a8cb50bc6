package h2srv

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCurl: curl's HTTP/2 (nghttp2) round trips a POST.
func TestCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed (apt-get install curl)")
	}
	if out, _ := exec.Command(curl, "-V").Output(); !strings.Contains(string(out), "HTTP2") {
		t.Skip("this curl has no HTTP/2 (apt-get install curl: Debian's is built with nghttp2)")
	}
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Proto", r.Proto)
		_, _ = io.WriteString(w, strings.ToUpper(string(b)))
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, curl, "-sS", "-k", "--http2", "-i", "--data-binary", "hello curl", ts.url("/c")).CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	got := strings.ReplaceAll(string(out), "\r\n", "\n")
	for _, want := range []string{"HTTP/2 200", "x-proto: HTTP/2.0", "content-length: 10", "\n\nHELLO CURL"} {
		if !strings.Contains(got, want) {
			t.Errorf("curl output lacks %q:\n%s", want, got)
		}
	}
}
