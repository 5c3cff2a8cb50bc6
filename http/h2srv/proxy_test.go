package h2srv

import (
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestReverseProxy: httputil.ReverseProxy on the server, to an h2c
// upstream, as the edge passes gRPC: the request body streams up, the
// answer streams down flushed, and the upstream's trailers arrive.
func TestReverseProxy(t *testing.T) {
	// The server first: its goroutine check runs after the upstream's
	// cleanups.
	var rp *httputil.ReverseProxy
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(10 * time.Second))
		rp.ServeHTTP(w, r)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	up := &http.Server{Protocols: &h2c, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "Grpc-Status")
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // the head first: the client waits for it to send
		buf := make([]byte, 16)
		for {
			n, err := r.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write([]byte(strings.ToUpper(string(buf[:n]))))
				w.(http.Flusher).Flush()
			}
			if err != nil {
				break
			}
		}
		w.Header().Set("Grpc-Status", "0")
		w.Header().Set(http.TrailerPrefix+"Grpc-Message", "done")
	})}
	go func() { _ = up.Serve(ln) }()
	t.Cleanup(func() { _ = up.Close() })

	target, _ := url.Parse("http://" + ln.Addr().String())
	tr := &http.Transport{Protocols: &h2c}
	t.Cleanup(tr.CloseIdleConnections)
	rp = &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     tr,
		FlushInterval: -1,
	}
	cl := testClients(t)["net/http"]
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", ts.url("/svc/Method"), pr)
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 16)
	for _, piece := range []string{"one", "two", "three"} {
		if _, err := io.WriteString(pw, piece); err != nil {
			t.Fatal(err)
		}
		n, err := io.ReadAtLeast(resp.Body, buf, len(piece))
		if err != nil || string(buf[:n]) != strings.ToUpper(piece) {
			t.Fatalf("piece %q came back as %q, %v", piece, buf[:n], err)
		}
	}
	pw.Close()
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Fatalf("after the last piece: %q, %v", rest, err)
	}
	if got := resp.Trailer.Get("Grpc-Status"); got != "0" {
		t.Errorf("Grpc-Status trailer %q, want 0", got)
	}
	if got := resp.Trailer.Get("Grpc-Message"); got != "done" {
		t.Errorf("Grpc-Message trailer %q, want done", got)
	}
}
