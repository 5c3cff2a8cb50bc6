package proxy

import (
	"bufio"
	"errors"
	"io"
	"net/http"
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
	get := func(path string) (int, string) {
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
// between two reads, after an answer read before it on the connection,
// a Content-Length in the head is found when the head came in one read
// and never found where there is none (not in the answer before, a
// field that ends in the name, or the body after).
func TestBothLengthsAcrossReads(t *testing.T) {
	first := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	body := "1c\r\n\r\nContent-Length: 1\r\n\r\nxxxx\r\n0\r\n\r\n"
	for _, tc := range []struct {
		head string
		both bool
	}{
		{"HTTP/1.1 200 OK\r\nX-Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", true},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", true},
	} {
		for i := 0; i <= len(tc.head); i++ {
			br := bufio.NewReaderSize(&piecesReader{pieces: []string{first + tc.head[:i], tc.head[i:] + body}}, 4096)
			var resp fasthttp.Response
			if err := readHead(&resp, br); err != nil {
				t.Fatal(err)
			}
			if err := resp.ReadBody(br, 0); err != nil {
				t.Fatal(err)
			}
			resp.Reset()
			err := readHead(&resp, br)
			switch {
			case !tc.both && err != nil:
				t.Fatalf("%q cut at %d: %v", tc.head, i, err)
			case tc.both && (i == 0 || i == len(tc.head)) && !errors.Is(err, errBothLengths):
				t.Fatalf("%q in one read: %v, want errBothLengths", tc.head, err)
			case err != nil && !errors.Is(err, errBothLengths):
				t.Fatalf("%q cut at %d: %v", tc.head, i, err)
			}
		}
	}
}

// TestUpstreamOddHeads: an upstream head longer than the pool's read
// buffer (endless) is a 502 at once, not a wait; two Content-Lengths,
// even of one value, are a 502 (as nginx has it); an informational
// answer other than 101 (103 Early Hints) is read past and not passed
// on, the final answer is.
func TestUpstreamOddHeads(t *testing.T) {
	addr, _ := scriptedUpstream(t, map[string]string{
		"/endless": "HTTP/1.1 200 OK\r\nX-Pad: " + strings.Repeat("p", 5000),
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
