package httpx

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// incarnation serves one server generation on h.Next() and returns a
// function that stops it (the socket stays open).
func incarnation(t *testing.T, h *Handoff, body string) (stop func()) {
	t.Helper()
	ln := h.Next()
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString(body) }}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	return func() {
		_ = srv.Shutdown()
		_ = ln.Close()
		<-done
	}
}

// get asks url with a fresh connection each time (a kept-alive one would
// stay with the incarnation that accepted it).
func get(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

// One socket serves two incarnations; between them a client gets 503
// with Retry-After, never a refused connection; Close ends it.
func TestHandoff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandoff(ln)
	url := "http://" + h.Addr().String() + "/"

	stop := incarnation(t, h, "first")
	if code, body, _ := get(t, url); code != 200 || body != "first" {
		t.Fatalf("first incarnation: GET = %d %q, want 200 first", code, body)
	}
	stop()

	code, body, hdr := get(t, url)
	if code != 503 || hdr.Get("Retry-After") != "1" || !strings.Contains(body, "restarting") {
		t.Fatalf("between incarnations: GET = %d %q Retry-After %q, want 503 with Retry-After 1", code, body, hdr.Get("Retry-After"))
	}

	stop = incarnation(t, h, "second")
	if code, body, _ := get(t, url); code != 200 || body != "second" {
		t.Fatalf("second incarnation: GET = %d %q, want 200 second", code, body)
	}
	stop()

	h.Close()
	if c, err := net.Dial("tcp", h.Addr().String()); err == nil {
		c.Close()
		t.Fatalf("dial after Close succeeded, want the socket closed")
	}
}
