package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// An upstream that takes a request and never answers is a 504 after
// UpstreamTimeout, not after several: the request is sent to it once,
// over HTTP/1.1 and HTTP/2, whatever its method. So is a request the
// upstream answered with a head the edge cannot read, or with more
// informational answers than it reads (502): the upstream had the
// request, and it is not asked again. Only a pooled connection found
// closed before anything of the answer came is tried again.
func TestEdgeAsksAFailingUpstreamOnce(t *testing.T) {
	var asked atomic.Int64
	answers := map[string]string{
		"/garbled": "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
		"/storm":   strings.Repeat("HTTP/1.1 102 Processing\r\n\r\n", 101),
		"/lf":      "HTTP/1.1 102 Processing\n\n", // then silent, as /silent
	}
	up := testutil.ServeTCP(t, func(c net.Conn) {
		testutil.ReadRequests(c, func(req *http.Request) bool {
			asked.Add(1)
			_, err := c.Write([]byte(answers[req.URL.Path]))
			return err == nil
		})
	})
	const timeout = 1500 * time.Millisecond
	e := newTestH2Edge(t, map[string]string{"s.p2p": up.String()}, Deps{UpstreamTimeout: timeout})
	httpAddr, _ := e.s.Addrs()
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/silent", 504},
		{"PUT", "/silent", 504},
		{"POST", "/silent", 504},
		{"GET", "/lf", 504},
		{"GET", "/garbled", 502},
		{"HEAD", "/garbled", 502},
		{"GET", "/storm", 502},
	} {
		for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
			asked.Store(0)
			start := time.Now()
			var code int
			if proto == "HTTP/1.1" {
				c := sendRaw(t, httpAddr.String(), tc.method+" "+tc.path+" HTTP/1.1\r\nHost: s.p2p\r\nContent-Length: 0\r\n\r\n")
				_ = c.SetReadDeadline(time.Now().Add(20 * timeout))
				resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: tc.method})
				if err != nil {
					t.Fatalf("%s %s %s: %v after %v", proto, tc.method, tc.path, err, time.Since(start))
				}
				resp.Body.Close()
				code = resp.StatusCode
			} else {
				resp, _ := e.do(t, tc.method, "https://s.p2p"+tc.path, nil, 0)
				code = resp.StatusCode
			}
			took := time.Since(start)
			if n := asked.Load(); code != tc.code || n != 1 {
				t.Fatalf("%s %s %s: %d, the upstream asked %d times; want %d, asked once", proto, tc.method, tc.path, code, n, tc.code)
			}
			// One timeout is at least 7/8 of it (timeouts.go); two are
			// at least 1.75 times it.
			if tc.code == 504 && took >= timeout*3/2 {
				t.Fatalf("%s %s %s: 504 after %v, want it after one UpstreamTimeout (%v)", proto, tc.method, tc.path, took, timeout)
			}
		}
	}
}

// A pooled connection that holds bytes which are no answer's head when
// its next exchange begins (an upstream that sent more than its last
// answer, after the edge had read it) is given up, and an idempotent
// request tried again on another, over HTTP/1.1 and HTTP/2: here each
// upstream connection answers its first request and sends bytes that
// are no head to the next.
func TestEdgeAsksAgainPastLeftoverBytes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for i := 0; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					a := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n" + req.URL.Path
					if i > 0 {
						a = "<p>the rest of a body</p>\r\n\r\n"
					}
					if _, err := c.Write([]byte(a)); err != nil {
						return
					}
				}
			}()
		}
	}()
	e := newTestH2Edge(t, map[string]string{"s.p2p": ln.Addr().String()}, Deps{})
	httpAddr, _ := e.s.Addrs()
	c := sendRaw(t, httpAddr.String(), "")
	br := bufio.NewReader(c)
	for _, path := range []string{"/a", "/b"} {
		if _, err := c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: s.p2p\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("HTTP/1.1 %s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != path {
			t.Fatalf("HTTP/1.1 %s: %d %q, want 200 %q", path, resp.StatusCode, b, path)
		}
	}
	if resp, body := e.do(t, "GET", "https://s.p2p/c", nil, 0); resp.StatusCode != 200 || body != "/c" {
		t.Fatalf("HTTP/2 /c: %d %q, want 200 \"/c\"", resp.StatusCode, body)
	}
}
