package proxy

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestEdgeReadsLoneLFAnswers: answers whose head lines end in LF alone
// (one of them with CRLF fields after its status line, one whose empty
// line is a CRLF, as a script writes it that prints its fields with LF
// and then "\r\n", and one after an informational head) pass at once over HTTP/1.1 and HTTP/2 from an
// upstream that keeps its connection open, and the connection serves
// the next request; so does such an answer refusing an upgrade.
func TestEdgeReadsLoneLFAnswers(t *testing.T) {
	addr, conns := scriptedUpstream(t, map[string]string{
		"/lf":    "HTTP/1.1 200 OK\nContent-Length: 2\nX-Up: lf\n\nok",
		"/mixed": "HTTP/1.1 200 OK\nContent-Length: 5\r\nX-Up: mixed\r\n\nmixed",
		"/cont":  "HTTP/1.1 100 Continue\n\nHTTP/1.1 201 Created\nContent-Length: 4\nX-Up: cont\n\ncont",
		"/crlf":  "HTTP/1.1 200 OK\nContent-Length: 13\nX-Up: crlf\n\r\nbody\nX-Up: no",
	})
	e := newTestH2Edge(t, map[string]string{"lf.p2p": addr}, Deps{})
	httpAddr, _ := e.s.Addrs()
	c := &http.Client{Timeout: 5 * time.Second}
	want := map[string][3]string{"/lf": {"200", "ok", "lf"}, "/mixed": {"200", "mixed", "mixed"}, "/cont": {"201", "cont", "cont"},
		"/crlf": {"200", "body\nX-Up: no", "crlf"}}
	check := func(proto, path string, resp *http.Response, body string) {
		t.Helper()
		w := want[path]
		if got := [3]string{resp.Status[:3], body, resp.Header.Get("X-Up")}; got != w {
			t.Fatalf("%s %s: status, body, X-Up %q, want %q", proto, path, got, w)
		}
	}
	for range 2 {
		for _, path := range []string{"/lf", "/mixed", "/cont", "/crlf"} {
			req, _ := http.NewRequest("GET", "http://"+httpAddr.String()+path, nil)
			req.Host = "lf.p2p"
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("HTTP/1.1 %s: %v", path, err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("HTTP/1.1 %s: %v", path, err)
			}
			check("HTTP/1.1", path, resp, string(b))
			resp, body := e.do(t, "GET", "https://lf.p2p"+path, nil, 0)
			check("HTTP/2", path, resp, body)
			// An upgrade the upstream refuses (websocket's path).
			req, _ = http.NewRequest("GET", "http://"+httpAddr.String()+path, nil)
			req.Host = "lf.p2p"
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			if resp, err = c.Do(req); err != nil {
				t.Fatalf("HTTP/1.1 upgrade %s: %v", path, err)
			}
			b, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("HTTP/1.1 upgrade %s: %v", path, err)
			}
			check("HTTP/1.1 upgrade", path, resp, string(b))
		}
	}
	if n := conns.Load(); n > 10 {
		t.Fatalf("%d upstream connections for 16 answers on keep-alive connections and 8 refused upgrades, want at most 10", n)
	}
}

// FuzzLoneLFHead: a head whose lines end in LF alone reads as the same
// head with CRLF line ends (status, fields, and the bytes left after
// it), whenever that one reads; the reader never waits for more than
// it was given.
func FuzzLoneLFHead(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\nContent-Length: 2\n\nok")
	f.Add("HTTP/1.1 100 Continue\n\nHTTP/1.1 204 No Content\n\n")
	f.Add("HTTP/1.1 200 OK\nX-A: a\n b\n\n")
	f.Add("HTTP/1.0 302 Found\nLocation: /x\nSet-Cookie: a=1\nSet-Cookie: b=2\n\nrest\n\n")
	f.Add("HTTP/1.1 200 OK\n")
	f.Fuzz(func(t *testing.T, lf string) {
		if strings.Contains(lf, "\r") {
			return
		}
		read := func(raw string) (*fasthttp.Response, string, error) {
			var resp fasthttp.Response
			br := bufio.NewReaderSize(strings.NewReader(raw), 4096)
			err := readHead(&resp, br)
			rest, _ := io.ReadAll(br)
			return &resp, string(rest), err
		}
		want, wantRest, err := read(strings.ReplaceAll(lf, "\n", "\r\n"))
		if err != nil {
			return
		}
		got, gotRest, err := read(lf)
		if err != nil {
			t.Fatalf("%q: %v; with CRLFs it reads", lf, err)
		}
		if got.StatusCode() != want.StatusCode() || got.Header.String() != want.Header.String() ||
			strings.ReplaceAll(wantRest, "\r\n", "\n") != gotRest {
			t.Fatalf("%q: read as %d %q, rest %q; with CRLFs %d %q, rest %q", lf,
				got.StatusCode(), got.Header.String(), gotRest, want.StatusCode(), want.Header.String(), wantRest)
		}
	})
}
