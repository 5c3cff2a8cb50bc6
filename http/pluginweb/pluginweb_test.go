package pluginweb

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/actors/plugin"
	"peerdns/internal/token"
	"peerdns/transport/identity"
)

// serve runs s for rt on a real listener and returns its base URL.
func serve(t *testing.T, s *Server, rt *plugin.Runtime) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { s.Serve(ctx, rt) }}
	go srv.Serve(ln)
	t.Cleanup(func() { _ = srv.Shutdown() })
	return "http://" + ln.Addr().String()
}

func do(t *testing.T, method, url string, hdr map[string]string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader("body"))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestTokensStaticAndHandler(t *testing.T) {
	self, _ := identity.Generate()
	other, _ := identity.Generate()
	www := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(www, "index.html"), []byte("<h1>home</h1>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(www, "leak.txt")); err != nil {
		t.Fatal(err)
	}
	slow := make(chan struct{})
	defer close(slow)
	rt := plugin.NewRuntime("app.p2p", www, func(ctx context.Context, req *plugin.HandleRequest) (*plugin.HandleResponse, error) {
		switch req.Path {
		case "/slow":
			select {
			case <-slow:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case "/fail":
			return nil, plugin.ErrBadResponse
		}
		b, _ := json.Marshal(map[string]string{"method": req.Method, "path": req.Path, "peer": req.Headers[PeerHeader], "body": string(req.Body)})
		return &plugin.HandleResponse{Status: 200, Headers: map[string]string{"Content-Type": "application/json", "Content-Length": "999"}, Body: b}, nil
	})
	base := serve(t, &Server{Self: self.ID(), Timeout: 300 * time.Millisecond}, rt)

	good, _ := token.Issue(self, time.Now(), time.Hour)
	expired, _ := token.Issue(self, time.Now().Add(-2*time.Hour), time.Hour)
	theirs, _ := token.Issue(other, time.Now(), time.Hour)
	raw, _ := base64.StdEncoding.DecodeString(good)
	tampered := base64.StdEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"expiresAt":`, `"expiresAt":1`, 1)))

	for _, c := range []struct {
		name   string
		hdr    map[string]string
		status int
		want   string
	}{
		{"no token", nil, 401, `"error":"Authentication required"`},
		{"bearer", map[string]string{"Authorization": "Bearer " + good}, 200, `"peer":"` + self.ID()},
		{"x-auth-token", map[string]string{"X-Auth-Token": good}, 200, `"peer":"` + self.ID()},
		{"tampered", map[string]string{"Authorization": "Bearer " + tampered}, 401, "Invalid or missing authentication token"},
		{"expired", map[string]string{"Authorization": "Bearer " + expired}, 401, "Authentication required"},
		{"garbage", map[string]string{"Authorization": "Bearer !!!"}, 401, "Authentication required"},
		{"another peer", map[string]string{"Authorization": "Bearer " + theirs}, 403, `"message":"Only the local peer can perform this operation"`},
		{"forged peer header", map[string]string{PeerHeader: other.ID()}, 401, "Authentication required"},
	} {
		code, body, _ := do(t, "POST", base+"/api/notes", c.hdr)
		if code != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s", c.name, code, body)
		}
	}
	// A GET with a forged peer header reaches the handler without it.
	if code, body, _ := do(t, "GET", base+"/api/x", map[string]string{PeerHeader: other.ID()}); code != 200 || !strings.Contains(body, `"peer":""`) {
		t.Fatalf("forged header on GET: %d %s", code, body)
	}
	if code, body, h := do(t, "GET", base+"/", nil); code != 200 || body != "<h1>home</h1>" || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("index: %d %s %v", code, body, h)
	}
	for _, p := range []string{"/leak.txt", "/../" + filepath.Base(outside) + "/secret.txt", "/%2e%2e/secret.txt"} {
		if code, body, _ := do(t, "GET", base+p, nil); strings.Contains(body, "secret") && !strings.Contains(body, `"path"`) {
			t.Fatalf("%s served a file outside www: %d %s", p, code, body)
		}
	}
	if code, _, _ := do(t, "GET", base+"/slow", nil); code != 504 {
		t.Fatalf("slow handler: %d", code)
	}
	if code, _, _ := do(t, "GET", base+"/fail", nil); code != 502 {
		t.Fatalf("failing handler: %d", code)
	}
	// www only: writes have nothing to go to.
	static := serve(t, &Server{Self: self.ID()}, plugin.NewRuntime("www.p2p", www, nil))
	if code, _, _ := do(t, "GET", static+"/nope", nil); code != 404 {
		t.Fatalf("www-only missing file: %d", code)
	}
	if code, _, _ := do(t, "PUT", static+"/x", map[string]string{"Authorization": "Bearer " + good}); code != 405 {
		t.Fatalf("www-only write: %d", code)
	}
}
