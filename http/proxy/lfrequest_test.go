package proxy

import (
	"bufio"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLFRequestHead: a request head whose lines end in a lone LF, which
// fasthttp would wait on for a CRLFCRLF, is refused at once with 400 and
// its connection closed, not left to wait for the read timeout (408);
// so is one whose empty line alone is a lone LF, and one whose end came
// in a read of its own.
func TestLFRequestHead(t *testing.T) {
	dial := rawEdge(t)
	for _, pieces := range [][]string{
		{"GET /lf HTTP/1.1\nHost: echo.p2p\n\n"},
		{"GET /lf HTTP/1.1\r\nHost: echo.p2p\n\n"},
		{"GET /lf HTTP/1.1\r\nHost: echo.p2p\r\n\n"},
		{"POST /lf HTTP/1.1\nHost: echo.p2p\nContent-Length: 2\n\nhi"},
		{"GET /lf HTTP/1.1\nHost: echo.p2p\n", "\n"},
		{"\r\n", "GET /lf HTTP/1.1\nHost: echo.p2p\n\n"},
	} {
		c, br := dial()
		// Well within the edge's read timeout (10 s).
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		for _, p := range pieces {
			if _, err := io.WriteString(c, p); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q: %v", pieces, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), "lone LF") {
			t.Fatalf("%q: %d %s, want 400 at once", pieces, resp.StatusCode, b)
		}
		if n, err := br.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("%q: after the 400: %d bytes, %v; want the connection closed", pieces, n, err)
		}
	}
}

// TestCRLFHeadInPieces: heads that end in CRLF are served however their
// bytes come (the empty line in a read of its own, empty lines before
// the request line), bodies with empty lines in them, sent after their
// head, pass whole; and a lone-LF head that fasthttp reads (a CRLFCRLF
// came behind it) is served too.
func TestCRLFHeadInPieces(t *testing.T) {
	dial := rawEdge(t)
	body := "line\n\nline\n\n"
	for _, tc := range []struct {
		pieces []string
		want   []string // the answers' bodies, in order
	}{
		{[]string{"GET /a HTTP/1.1\r\nHost: echo.p2p\r\n", "\r\n"}, []string{`expect=[] body=""`}},
		{[]string{"GET /a HTTP/1.1\r\nHost: echo.p2p\r\n\r", "\n"}, []string{`expect=[] body=""`}},
		{[]string{"\r\n", "GET /a HTTP/1.1\r\nHost: echo.p2p\r\n\r\n"}, []string{`expect=[] body=""`}},
		{[]string{"POST /a HTTP/1.1\r\nHost: echo.p2p\r\nContent-Length: 12\r\n\r\n", body[:5], body[5:]}, []string{`expect=[] body="line\n\nline\n\n"`}},
		{[]string{"GET /a HTTP/1.1\nHost: echo.p2p\n\nGET /b HTTP/1.1\r\nHost: echo.p2p\r\n\r\n"}, []string{`expect=[] body=""`, `expect=[] body=""`}},
	} {
		c, br := dial()
		for _, p := range tc.pieces {
			if _, err := io.WriteString(c, p); err != nil {
				t.Fatal(err)
			}
		}
		for _, want := range tc.want {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%q: %v", tc.pieces, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != want {
				t.Fatalf("%q: %d %s, want 200 %s", tc.pieces, resp.StatusCode, b, want)
			}
		}
	}
}

// TestHeadWatchSplits: the watch finds a head's end however the head's
// bytes are cut into two reads, and finds none in a head not yet ended
// or in empty lines before a request line.
func TestHeadWatchSplits(t *testing.T) {
	for head, ended := range map[string]bool{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n":   true,
		"GET / HTTP/1.1\nHost: a\n\n":         true,
		"GET / HTTP/1.1\r\nHost: a\r\n\n":     true,
		"\r\n\nGET / HTTP/1.1\nHost: a\n\n":   true,
		"GET / HTTP/1.1\r\nHost: a\r\n":       false,
		"GET / HTTP/1.1\nHost: a\n\r":         false,
		"\r\n\r\n\n":                          false,
		"GET / HTTP/1.1\r\nHost: a\r\n\r\nxy": true,
	} {
		for i := 0; i <= len(head); i++ {
			var w headWatch
			w.start()
			w.saw([]byte(head[:i]))
			w.saw([]byte(head[i:]))
			if w.stuck() != ended {
				t.Errorf("%q cut at %d: ended %v, want %v", head, i, w.stuck(), ended)
			}
		}
	}
}

// TestLFRequestHeadTLS: over HTTPS too (the watch is on the TLS
// connection's plain side), a lone-LF head is refused at once and a
// CRLF one served.
func TestLFRequestHeadTLS(t *testing.T) {
	e := newTestH2Edge(t, map[string]string{"echo.p2p": echoUpstream(t)}, Deps{})
	_, httpsAddr := e.s.Addrs()
	for head, want := range map[string]int{
		"GET /lf HTTP/1.1\nHost: echo.p2p\n\n":       400,
		"GET /lf HTTP/1.1\r\nHost: echo.p2p\r\n\r\n": 200,
	} {
		c, err := tls.Dial("tcp", httpsAddr.String(), &tls.Config{RootCAs: e.s.d.CA.Pool(), ServerName: "echo.p2p", NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second)) // well within the read timeout
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%q: %v", head, err)
		}
		resp.Body.Close()
		c.Close()
		if resp.StatusCode != want {
			t.Fatalf("%q: %d, want %d", head, resp.StatusCode, want)
		}
	}
}
