package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestUpstreamDeclaresBothLengths: an upstream answer with both
// Content-Length and Transfer-Encoding (in either order, in CRLF or
// lone-LF lines) is a 502, asked once, and its connection is not used
// again, as nginx refuses it; one with a Content-Length alone, or a
// field whose name only ends in Content-Length, passes.
func TestUpstreamDeclaresBothLengths(t *testing.T) {
	addr, conns := scriptedUpstream(t, map[string]string{
		"/cl-te":  "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"/te-cl":  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\ncontent-length : 3\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"/lf":     "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\nContent-Length: 3\n\n5\r\nhello\r\n0\r\n\r\n",
		"/x-cl":   "HTTP/1.1 200 OK\r\nX-Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"/sized":  "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"/big-te": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\nX-Pad: " + strings.Repeat("p", 3000) + "\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	})
	get := poolGet(t, addr)
	if st, body := get("/sized"); st != 200 || body != "hello" {
		t.Fatalf("/sized: %d %q", st, body)
	}
	if st, body := get("/x-cl"); st != 200 || body != "hello" {
		t.Fatalf("/x-cl: %d %q", st, body)
	}
	n := conns.Load()
	for _, p := range []string{"/cl-te", "/te-cl", "/lf", "/big-te"} {
		if st, body := get(p); st != 502 || !strings.Contains(body, "Content-Length and Transfer-Encoding") {
			t.Fatalf("%s: %d %q, want 502", p, st, body)
		}
		// Asked once, on the connection kept from the answer before; the
		// next request goes on a new one.
		if st, body := get("/sized"); st != 200 || body != "hello" {
			t.Fatalf("after %s: %d %q", p, st, body)
		}
		n++
		if got := conns.Load(); got != n {
			t.Fatalf("after %s: %d upstream connections, want %d", p, got, n)
		}
	}
}

// piecesReader hands out its pieces one a Read.
type piecesReader struct{ pieces []string }

func (r *piecesReader) Read(p []byte) (int, error) {
	if len(r.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.pieces[0])
	if r.pieces[0] = r.pieces[0][n:]; r.pieces[0] == "" {
		r.pieces = r.pieces[1:]
	}
	return n, nil
}

// TestBothLengthsAcrossReads: however a chunked answer's head is cut
// between two reads, on a fresh reader or after an answer (or an
// informational one) read before it on the same reader, a
// Content-Length in the head is found, and never found where there is
// none (not in the answer before, a field that ends in the name, or the
// body after).
func TestBothLengthsAcrossReads(t *testing.T) {
	chunk := "\r\nContent-Length: 1\r\n\r\nxxxx" // a head's line in the body
	body := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(chunk), chunk)
	for _, before := range []string{"", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "HTTP/1.1 103 Early Hints\r\nContent-Length: 9\r\n\r\n"} {
		for _, tc := range []struct {
			head string
			both bool
		}{
			{"HTTP/1.1 200 OK\r\nX-Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", false},
			{"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", true},
			{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", true},
			{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Pad: " + strings.Repeat("p", 300) + "\r\ncontent-length : 3\r\n\r\n", true},
		} {
			for i := 0; i <= len(tc.head); i++ {
				pieces := []string{before + tc.head[:i], tc.head[i:] + body}
				if before != "" && i == 0 {
					pieces = []string{before, tc.head + body}
				}
				br := bufio.NewReaderSize(&piecesReader{pieces: pieces}, 4096)
				var resp fasthttp.Response
				if strings.Contains(before, " 200 ") {
					if err := readHead(&resp, br); err != nil {
						t.Fatal(err)
					}
					if err := resp.ReadBody(br, 0); err != nil {
						t.Fatal(err)
					}
					resp.Reset()
				}
				err := readHead(&resp, br)
				switch {
				case !tc.both && err != nil:
					t.Fatalf("after %q, %q cut at %d: %v", before, tc.head, i, err)
				case tc.both && !errors.Is(err, errBothLengths):
					t.Fatalf("after %q, %q cut at %d: %v, want errBothLengths", before, tc.head, i, err)
				case !tc.both:
					if b, err := io.ReadAll(httputilChunked(br)); err != nil || string(b) != chunk {
						t.Fatalf("after %q, %q cut at %d: body %q %v", before, tc.head, i, b, err)
					}
				}
			}
		}
	}
}

// TestOldAnswerWithCoding: an HTTP/1.0 answer with a Transfer-Encoding
// (RFC 9112 §6.1: its framing is faulty) is read as nginx reads it:
// chunked when that is its one coding, its upstream connection closed
// after it even when the answer says keep-alive, and a 502 with a
// Content-Length beside it (the two framings end it in different
// places) or with another coding; one without the field is read as
// HTTP/1.0 frames it. Each is asked once.
func TestOldAnswerWithCoding(t *testing.T) {
	addr, conns := scriptedUpstream(t, map[string]string{
		"/sized":   "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"/chunked": "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"/lf":      "HTTP/1.0 200 OK\nConnection: keep-alive\nTransfer-Encoding: chunked\n\n5\r\nhello\r\n0\r\n\r\n",
		"/both":    "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nContent-Length: 10\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"/gzip":    "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: gzip\r\n\r\nhello",
		"/other":   "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"/plain":   "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\nhello",
	})
	get := poolGet(t, addr)
	for _, tc := range []struct {
		path   string
		status int
		body   string
		kept   bool // the upstream connection serves the next request
	}{
		{"/chunked", 200, "hello", false},
		{"/lf", 200, "hello", false},
		{"/both", 502, "Content-Length and Transfer-Encoding", false},
		{"/gzip", 502, "other than chunked", false},
		{"/other", 502, "other than chunked", false},
		{"/plain", 200, "hello", true},
	} {
		if st, body := get("/sized"); st != 200 || body != "hello" {
			t.Fatalf("before %s: %d %q", tc.path, st, body)
		}
		n := conns.Load()
		st, body := get(tc.path)
		if st != tc.status || tc.status == 200 && body != tc.body || tc.status != 200 && !strings.Contains(body, tc.body) {
			t.Fatalf("%s: %d %q, want %d %q", tc.path, st, body, tc.status, tc.body)
		}
		if got := conns.Load(); got != n {
			t.Fatalf("%s: asked on %d new upstream connections, want none (the one kept)", tc.path, got-n)
		}
		if st, body := get("/sized"); st != 200 || body != "hello" {
			t.Fatalf("after %s: %d %q", tc.path, st, body)
		}
		if kept := conns.Load() == n; kept != tc.kept {
			t.Fatalf("after %s: connection kept %v, want %v", tc.path, kept, tc.kept)
		}
	}
}

// TestUpstreamOddHeads: an upstream head longer than MaxAnswerHeadBytes
// (endless) is a 502 at once, not a wait; two Content-Lengths,
// even of one value, are a 502 (as nginx has it); an informational
// answer other than 101 (103 Early Hints) is read past and not passed
// on, the final answer is.
func TestUpstreamOddHeads(t *testing.T) {
	addr, _ := scriptedUpstream(t, map[string]string{
		"/endless": "HTTP/1.1 200 OK\r\nX-Pad: " + strings.Repeat("p", MaxAnswerHeadBytes),
		"/twice":   "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
		"/hints":   "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
	})
	s := New(Deps{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", AdminDomain: "admin.p2p",
		View: publishedView(map[string]string{"pool.p2p": "hs://pool"}), Dialer: tcpDialer{"hs://pool": addr}})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	edge, _ := s.Addrs()
	c := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second} // well under UpstreamTimeout
	for path, want := range map[string]int{"/endless": 502, "/twice": 502, "/hints": 200} {
		req, _ := http.NewRequest("GET", "http://"+edge.String()+path, nil)
		req.Host = "pool.p2p"
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || want == 200 && (string(b) != "hello" || resp.Header.Get("Link") != "") {
			t.Fatalf("%s: %d %q (Link %q), want %d", path, resp.StatusCode, b, resp.Header.Get("Link"), want)
		}
	}
}

// httputilChunked reads a chunked body from br.
func httputilChunked(br *bufio.Reader) io.Reader { return httputil.NewChunkedReader(br) }

// poolGet starts an edge whose pool.p2p is the upstream at addr and
// returns a GET of a path through it, by one kept-alive client
// connection: the answer's status and body.
func poolGet(t *testing.T, addr string) func(path string) (int, string) {
	t.Helper()
	s := New(Deps{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", AdminDomain: "admin.p2p",
		View: publishedView(map[string]string{"pool.p2p": "hs://pool"}), Dialer: tcpDialer{"hs://pool": addr}})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	edge, _ := s.Addrs()
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	return func(path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+edge.String()+path, nil)
		req.Host = "pool.p2p"
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

// TestUpstreamStatusBelow100: an answer whose status code is below 100
// (RFC 9110 §15: a valid one is 100 to 599) is a 502 at once: a status
// of 0 went to the client as 200 (fasthttp writes 200 for none), and
// one of 1 to 99 was read as informational, the edge waiting
// UpstreamTimeout for a final answer that never came.
func TestUpstreamStatusBelow100(t *testing.T) {
	addr, _ := scriptedUpstream(t, map[string]string{
		"/zero":  "HTTP/1.1 000 Zero\r\nContent-Length: 2\r\n\r\nok",
		"/99":    "HTTP/1.1 099 Low\r\nContent-Length: 2\r\n\r\nok",
		"/after": "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 042 Low\r\nContent-Length: 2\r\n\r\nok",
		"/ok":    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	})
	get := poolGet(t, addr) // its client's timeout is well under UpstreamTimeout
	for _, path := range []string{"/99", "/after", "/zero"} {
		if st, body := get(path); st != 502 {
			t.Fatalf("%s: %d %q, want 502", path, st, body)
		}
	}
	if st, body := get("/ok"); st != 200 || body != "ok" {
		t.Fatalf("/ok: %d %q", st, body)
	}
}
