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
