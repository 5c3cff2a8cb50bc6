package admin

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A body over MaxBody is answered 413, as the edge proxy answers it for
// the admin domain, not fasthttp's default 400 "Error when parsing
// request".
func TestBodyOverLimitIs413(t *testing.T) {
	addr := serveAdmin(t, Deps{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// The head announces the size; the server answers before any body.
	if _, err := fmt.Fprintf(c, "POST /api/add-local-dns HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, MaxBody+1); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("Content-Length %d = %d, want 413", MaxBody+1, resp.StatusCode)
	}
}

// A request head up to MaxHeaderBytes is read, as the edge reads it for
// the admin domain: a browser sends this host's cookies of every port
// (RFC 6265 §8.5), so another local program's cookies made the panel's
// requests 431 past fasthttp's default 4 KiB. Past the limit, 431.
func TestRequestHeadLimit(t *testing.T) {
	addr := serveAdmin(t, Deps{})
	for _, tt := range []struct {
		cookie int
		want   int
	}{{8 << 10, http.StatusNotFound}, {MaxHeaderBytes + 1, http.StatusRequestHeaderFieldsTooLarge}} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/favicon.ico", nil)
		req.Header.Set("Cookie", "c="+strings.Repeat("x", tt.cookie))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET with a %d-byte cookie = %d, want %d", tt.cookie, resp.StatusCode, tt.want)
		}
	}
}
