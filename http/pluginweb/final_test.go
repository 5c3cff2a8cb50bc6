package pluginweb

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"peerdns/actors/plugin"
)

// A handler's answer reaches the client as a final answer: a 1xx
// status is a 502 (the client would wait for the answer after an
// interim one, or switch protocols), so are headers over
// MaxHeaderBytes, and a header name that is not a token is dropped
// while the rest of the answer goes through.
func TestHandlerAnswerIsFinal(t *testing.T) {
	rt := plugin.NewRuntime("app.p2p", "", func(ctx context.Context, req *plugin.HandleRequest) (*plugin.HandleResponse, error) {
		switch req.Path {
		case "/100":
			return &plugin.HandleResponse{Status: 100, Body: []byte("body")}, nil
		case "/101":
			return &plugin.HandleResponse{Status: 101, Headers: map[string]string{"Upgrade": "websocket"}, Body: []byte("body")}, nil
		case "/600":
			return &plugin.HandleResponse{Status: 600}, nil
		case "/big":
			h := map[string]string{}
			for i := range 100 {
				h[fmt.Sprintf("X-H%d", i)] = strings.Repeat("v", 1<<10)
			}
			return &plugin.HandleResponse{Status: 200, Headers: h, Body: []byte("body")}, nil
		}
		return &plugin.HandleResponse{Status: 200, Headers: map[string]string{"Bad Name": "1", "X-Ok": "yes", "X:Colon": "2"}, Body: []byte("fine")}, nil
	})
	base := serve(t, &Server{Self: "self"}, rt)
	for _, p := range []string{"/100", "/101", "/600", "/big"} {
		c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: app.p2p\r\n\r\n", p)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if resp.StatusCode != 502 {
			t.Fatalf("%s: status %d, want 502", p, resp.StatusCode)
		}
	}
	code, body, h := do(t, "GET", base+"/ok", nil)
	if code != 200 || body != "fine" || h.Get("X-Ok") != "yes" {
		t.Fatalf("ok: %d %q %v", code, body, h)
	}
	for k := range h {
		if strings.ContainsAny(k, " :") {
			t.Fatalf("header %q passed", k)
		}
	}
}

// A header value with a control byte (other than a tab) is dropped: a
// client refuses a whole answer carrying one (Go's "malformed MIME
// header line"), so one bad header of a handler would cost it the page.
// Line breaks still become spaces, and the rest of the answer passes.
func TestHandlerHeaderValuesAreClean(t *testing.T) {
	rt := plugin.NewRuntime("app.p2p", "", func(ctx context.Context, req *plugin.HandleRequest) (*plugin.HandleResponse, error) {
		return &plugin.HandleResponse{Status: 200, Headers: map[string]string{
			"X-Nul": "a\x00b", "X-Ctl": "a\x01b", "X-Del": "a\x7fb", "Content-Type": "text/plain\x00",
			"Set-Cookie": "a=b\x00; Path=/", "X-Split": "a\r\nX-Injected: 1", "X-Tab": "a\tb", "X-Ok": "yes",
		}, Body: []byte("fine")}, nil
	})
	base := serve(t, &Server{Self: "self"}, rt)
	code, body, h := do(t, "GET", base+"/", nil)
	if code != 200 || body != "fine" || h.Get("X-Ok") != "yes" || h.Get("X-Tab") != "a\tb" {
		t.Fatalf("answer: %d %q %v", code, body, h)
	}
	if h.Get("X-Injected") != "" || !strings.HasPrefix(h.Get("X-Split"), "a") {
		t.Fatalf("line break in a value: %v", h)
	}
	for _, k := range []string{"X-Nul", "X-Ctl", "X-Del", "Set-Cookie"} {
		if v := h.Values(k); len(v) > 0 {
			t.Fatalf("%s passed: %q", k, v)
		}
	}
	if strings.ContainsRune(h.Get("Content-Type"), 0) {
		t.Fatalf("content type %q", h.Get("Content-Type"))
	}
}
