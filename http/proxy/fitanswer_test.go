package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// The answers of an upstream that speaks HTTP/1.0, sends no
// Content-Type, or declares a length on a 204, as each client of the
// edge gets them: in HTTP/1.1 (read off the wire), the status line says
// HTTP/1.1 and the client's connection serves the next request, no
// Content-Type is made up, and the 204 has no Content-Length; in HTTP/2
// and HTTP/3, no Content-Type is guessed from the body. A type the
// upstream sent stays.
func TestEdgeAnswersAsItself(t *testing.T) {
	page := "<html><body>no type said</body></html>"
	up, _ := scriptedUpstream(t, map[string]string{
		"/old":     "HTTP/1.0 200 OK\r\n\r\nclose-delimited",
		"/untyped": "HTTP/1.1 200 OK\r\nContent-Length: 38\r\n\r\n" + page,
		"/empty":   "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
		"/typed":   "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
		"/next":    "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext",
		"/chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
	})
	e := startTestEdge(t, map[string]string{"fit.p2p": up}, Deps{})
	httpAddr, _ := e.s.Addrs()

	c := sendRaw(t, httpAddr.String(), "")
	br := bufio.NewReader(c)
	get := func(path string) (*http.Response, string) {
		t.Helper()
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: fit.p2p\r\n\r\n"); err != nil {
			t.Fatalf("%s: %v (the connection did not stay open)", path, err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s: body: %v", path, err)
		}
		return resp, string(b)
	}
	resp, body := get("/old")
	if resp.Proto != "HTTP/1.1" || resp.StatusCode != 200 || body != "close-delimited" || resp.Close {
		t.Fatalf("/old: %s %s, body %q, close %v; want an HTTP/1.1 answer that keeps the connection", resp.Proto, resp.Status, body, resp.Close)
	}
	if _, ok := resp.Header["Content-Type"]; ok {
		t.Fatalf("/old: Content-Type %q the upstream did not send", resp.Header.Get("Content-Type"))
	}
	if resp, body = get("/untyped"); resp.Proto != "HTTP/1.1" || body != page {
		t.Fatalf("/untyped: %s, body %q", resp.Proto, body)
	}
	if _, ok := resp.Header["Content-Type"]; ok {
		t.Fatalf("/untyped: Content-Type %q the upstream did not send", resp.Header.Get("Content-Type"))
	}
	if resp, _ = get("/empty"); resp.StatusCode != 204 || resp.Header.Get("Content-Length") != "" || resp.Header.Get("Content-Type") != "" {
		t.Fatalf("/empty: %s, %v; want a 204 with neither Content-Length nor Content-Type", resp.Status, resp.Header)
	}
	// Nothing was taken for the 204's declared five bytes.
	if resp, body = get("/typed"); body != "{}" || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("/typed: %s, %v, body %q", resp.Status, resp.Header, body)
	}
	if _, body = get("/next"); body != "next" {
		t.Fatalf("/next: body %q", body)
	}
	// An HTTP/1.0 client gets an answer of unknown length up to the
	// connection's close, not chunked, whatever framing came from
	// upstream; one of known length keeps it. So does the answer to an
	// upload (a body longer than SmallBody, streamed upstream).
	upload := "POST /chunked HTTP/1.0\r\nHost: fit.p2p\r\nContent-Length: " + strconv.Itoa(SmallBody+1) + "\r\n\r\n" + strings.Repeat("u", SmallBody+1)
	for req, want := range map[string]string{
		"GET /chunked": "hello world", "GET /old": "close-delimited", "GET /typed": "{}", upload: "hello world",
	} {
		if !strings.HasPrefix(req, "POST") {
			req += " HTTP/1.0\r\nHost: fit.p2p\r\n\r\n"
		}
		path, _, _ := strings.Cut(req, "\r\n")
		c := sendRaw(t, httpAddr.String(), req)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		all, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("%s: %v after %q", path, err, all)
		}
		head, body, _ := strings.Cut(string(all), "\r\n\r\n")
		if !strings.HasPrefix(head, "HTTP/1.1 200 OK\r\n") || body != want || strings.Contains(strings.ToLower(head), "transfer-encoding") {
			t.Fatalf("%s: head %q, body %q; want %q up to the close, no Transfer-Encoding", path, head, body, want)
		}
	}

	h3tr := e.h3(t, "fit.p2p")
	for _, rt := range []http.RoundTripper{e.c.Transport, h3tr} {
		cl := &http.Client{Timeout: 10 * time.Second, Transport: rt}
		for path, want := range map[string]string{"/untyped": "", "/old": "", "/typed": "application/json"} {
			resp, err := cl.Get("https://fit.p2p" + path)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if got, ok := resp.Header["Content-Type"]; resp.StatusCode != 200 || strings.Join(got, ",") != want || ok != (want != "") {
				t.Fatalf("%s over %s: %d, Content-Type %q (present %v), want %q", path, resp.Proto, resp.StatusCode, got, ok, want)
			}
		}
	}
}

// The forwarding headers reach the upstream as the edge's alone, on
// every protocol: every X-Forwarded-For the client sent, in order, then
// its address, in one field; one X-Forwarded-Proto and one
// X-Forwarded-Host, the edge's, however many the client sent and in
// whatever case. Without forwarding fields of its own a request gets the
// same three.
func TestEdgeOwnsForwardingHeaders(t *testing.T) {
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "for=%s proto=%s host=%s", strings.Join(r.Header.Values("X-Forwarded-For"), "|"),
			strings.Join(r.Header.Values("X-Forwarded-Proto"), "|"), strings.Join(r.Header.Values("X-Forwarded-Host"), "|"))
	})
	e := startTestEdge(t, map[string]string{"fwd.p2p": up}, Deps{})
	httpAddr, _ := e.s.Addrs()

	c := sendRaw(t, httpAddr.String(), "GET / HTTP/1.1\r\nHost: fwd.p2p\r\nX-Forwarded-Proto: https\r\nx-forwarded-proto: https\r\n"+
		"x-forwarded-for: 192.0.2.6\r\nX-Forwarded-For: 192.0.2.7, 192.0.2.8\r\nX-Forwarded-Host: evil.example\r\nX-FORWARDED-HOST: evil2.example\r\n\r\n")
	if st, _, body := answer(t, c); st != 200 || body != "for=192.0.2.6, 192.0.2.7, 192.0.2.8, 127.0.0.1 proto=http host=fwd.p2p" {
		t.Fatalf("HTTP/1.1 with the client's own: %d %q", st, body)
	}
	c = sendRaw(t, httpAddr.String(), "GET / HTTP/1.1\r\nHost: fwd.p2p\r\n\r\n")
	if st, _, body := answer(t, c); st != 200 || body != "for=127.0.0.1 proto=http host=fwd.p2p" {
		t.Fatalf("HTTP/1.1 without: %d %q", st, body)
	}

	h3tr := e.h3(t, "fwd.p2p")
	for _, rt := range []http.RoundTripper{e.c.Transport, h3tr} {
		for _, own := range []bool{true, false} {
			req, _ := http.NewRequest("GET", "https://fwd.p2p/", nil)
			want := "for=127.0.0.1 proto=https host=fwd.p2p"
			if own {
				req.Header["X-Forwarded-Proto"] = []string{"http", "https"}
				req.Header["X-Forwarded-For"] = []string{"192.0.2.6", "192.0.2.7"}
				req.Header["X-Forwarded-Host"] = []string{"evil.example", "evil2.example"}
				want = "for=192.0.2.6, 192.0.2.7, 127.0.0.1 proto=https host=fwd.p2p"
			}
			resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: rt}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != want {
				t.Fatalf("%s (the client's own: %v): %d %q, want %q", resp.Proto, own, resp.StatusCode, b, want)
			}
		}
	}
}

// A head the edge cannot read is not quoted back: an upstream's answer
// with a broken field, or a status line fasthttp quotes whole in its
// error whatever it is told (no space after the version, a status code
// that is not a number), gets a 502 that names the fault but holds none
// of the answer's bytes, over HTTP/1.1 and HTTP/2 (whose pool reads
// heads outside fasthttp's client); a client's request fasthttp refuses
// gets a 400 without its own bytes, also when fasthttp quotes it whole
// (a request line without its second space); and neither reaches the
// proxy's log.
func TestEdgeErrorsQuoteNoHead(t *testing.T) {
	up, _ := scriptedUpstream(t, map[string]string{
		"/broken":  "HTTP/1.1 200 OK\r\nX-Secret-Token: s3cr3t\r\nX-A: a\rb\r\nContent-Length: 2\r\n\r\nok",
		"/nospace": "HTTP/1.1\r\nX-Secret-Token: s3cr3t\r\nContent-Length: 2\r\n\r\nok",
		"/status":  "HTTP/1.1 abc OK\r\nX-Secret-Token: s3cr3t\r\nContent-Length: 2\r\n\r\nok",
	})
	var log lockedBuffer
	e := startTestEdge(t, map[string]string{"q.p2p": up}, Deps{NoHTTP3: true,
		Log: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	httpAddr, _ := e.s.Addrs()
	for path, fault := range map[string]string{"/broken": "error when reading response headers", "/nospace": "first line of response", "/status": "status code"} {
		c := sendRaw(t, httpAddr.String(), "GET "+path+" HTTP/1.1\r\nHost: q.p2p\r\n\r\n")
		if st, _, body := answer(t, c); st != 502 || strings.Contains(body, "s3cr3t") || !strings.Contains(body, "error when reading response headers") {
			t.Fatalf("HTTP/1.1 %s: %d %q; want a 502 that names the fault, without the answer's bytes", path, st, body)
		}
		req, _ := http.NewRequest("GET", "https://q.p2p"+path, nil)
		resp, err := e.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 502 || strings.Contains(string(b), "s3cr3t") || !strings.Contains(string(b), fault) {
			t.Fatalf("HTTP/2 %s: %d %q; want a 502 that names the fault (%q), without the answer's bytes", path, resp.StatusCode, b, fault)
		}
	}
	for _, head := range []string{
		"POST / HTTP/1.1\r\nHost: q.p2p\r\nX-Secret-Token: s3cr3t\r\nTransfer-Encoding: gzip\r\n\r\n",
		"GET /\tHTTP/1.1\r\nHost: q.p2p\r\nCookie: session=s3cr3t\r\n\r\n",
		"GET /HTTP/1.1\r\nHost: q.p2p\r\nAuthorization: Bearer s3cr3t\r\n\r\n",
	} {
		c := sendRaw(t, httpAddr.String(), head)
		if st, _, body := answer(t, c); st != 400 || strings.Contains(body, "s3cr3t") || !strings.Contains(body, "error when reading request headers") {
			t.Fatalf("%q, which fasthttp refuses: %d %q; want a 400 that names the fault, without the request's bytes", head, st, body)
		}
	}
	// The refusals are logged (at debug level) once their answers are
	// out, on the connection's goroutine: the last one's line is awaited.
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := strings.Count(log.String(), "error when reading request headers"); n < 3 {
			return fmt.Errorf("%d refused requests logged, want 3", n)
		}
		return nil
	})
	if l := log.String(); strings.Contains(l, "s3cr3t") {
		t.Fatalf("the proxy's log holds a head's bytes: %s", l)
	}
}

// lockedBuffer is a bytes.Buffer for a logger written from several
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A TLS client that offers only http/1.0 in ALPN (curl --http1.0)
// completes its handshake, as with nginx, and is answered in HTTP/1.1
// framing it can read: a body of unknown length up to the close.
func TestEdgeTakesHTTP10OverTLS(t *testing.T) {
	up, _ := scriptedUpstream(t, map[string]string{
		"/chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	})
	e := startTestEdge(t, map[string]string{"old.p2p": up}, Deps{NoHTTP3: true})
	_, httpsAddr := e.s.Addrs()
	c, err := tls.Dial("tcp", httpsAddr.String(), &tls.Config{RootCAs: e.s.d.CA.Pool(), ServerName: "old.p2p", NextProtos: []string{"http/1.0"}})
	if err != nil {
		t.Fatalf("handshake offering http/1.0 alone: %v", err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.0" {
		t.Fatalf("ALPN chose %q", p)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /chunked HTTP/1.0\r\nHost: old.p2p\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(c)
	if head, body, _ := strings.Cut(string(all), "\r\n\r\n"); err != nil || !strings.HasPrefix(head, "HTTP/1.1 200 OK") || body != "hello" {
		t.Fatalf("%q, %v; want a 200 with hello up to the close", all, err)
	}
}

// A request body sent without a Content-Type reaches the upstream
// without one (fasthttp would name application/octet-stream), over
// HTTP/1.1 (a body read whole and one streamed) and HTTP/2; a type the
// client sent stays.
func TestEdgeAddsNoRequestType(t *testing.T) {
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d %q", n, r.Header.Values("Content-Type"))
	})
	e := newTestH2Edge(t, map[string]string{"t.p2p": up}, Deps{})
	httpAddr, _ := e.s.Addrs()
	small, big := strings.Repeat("s", 10), strings.Repeat("b", SmallBody+1)
	for _, tc := range []struct {
		body, typ, want string
	}{
		{small, "", `10 []`},
		{big, "", fmt.Sprintf(`%d []`, len(big))},
		{small, "text/csv", `10 ["text/csv"]`},
	} {
		head := fmt.Sprintf("POST / HTTP/1.1\r\nHost: t.p2p\r\nContent-Length: %d\r\n", len(tc.body))
		if tc.typ != "" {
			head += "Content-Type: " + tc.typ + "\r\n"
		}
		if code, _, body := answer(t, sendRaw(t, httpAddr.String(), head+"\r\n"+tc.body)); code != 200 || body != tc.want {
			t.Fatalf("HTTP/1.1, %d bytes, type %q: %d %q, want 200 %q", len(tc.body), tc.typ, code, body, tc.want)
		}
		var hdr []string
		if tc.typ != "" {
			hdr = []string{"Content-Type", tc.typ}
		}
		if resp, body := e.do(t, "POST", "https://t.p2p/", strings.NewReader(tc.body), int64(len(tc.body)), hdr...); resp.StatusCode != 200 || body != tc.want {
			t.Fatalf("HTTP/2, %d bytes, type %q: %d %q, want 200 %q", len(tc.body), tc.typ, resp.StatusCode, body, tc.want)
		}
	}
}

// An answer whose upstream sent no Date gets the edge's (RFC 9110
// §6.6.1: a recipient with a clock that forwards such an answer adds
// one, as nginx does), however the request went: through the pool, or
// as an upload (a chunked body, or one longer than SmallBody, streamed
// upstream on a connection of its own).
func TestEdgeDatesEveryAnswer(t *testing.T) {
	up, _ := scriptedUpstream(t, map[string]string{
		"/undated": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	})
	e := startTestEdge(t, map[string]string{"date.p2p": up}, Deps{})
	httpAddr, _ := e.s.Addrs()
	for name, req := range map[string]string{
		"GET":            "GET /undated HTTP/1.1\r\nHost: date.p2p\r\n\r\n",
		"chunked upload": "POST /undated HTTP/1.1\r\nHost: date.p2p\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nup\r\n0\r\n\r\n",
		"long upload": "POST /undated HTTP/1.1\r\nHost: date.p2p\r\nContent-Length: " + strconv.Itoa(SmallBody+1) + "\r\n\r\n" +
			strings.Repeat("u", SmallBody+1),
	} {
		c := sendRaw(t, httpAddr.String(), req)
		st, h, body := answer(t, c)
		if st != 200 || body != "ok" {
			t.Fatalf("%s: %d %q", name, st, body)
		}
		if d, err := http.ParseTime(h.Get("Date")); err != nil || time.Since(d) > time.Minute {
			t.Fatalf("%s: Date %q; want the edge's", name, h.Get("Date"))
		}
	}
}

// A client's field whose name is a forwarding field's with underscores
// for dashes (X_Forwarded_For, x-forwarded_proto) does not reach the
// upstream: an app that reads fields as CGI variables (Rack, WSGI, CGI:
// HTTP_X_FORWARDED_FOR) takes both spellings for one name, and the
// client's could stand for the edge's (Puma's CVE-2024-45614). nginx
// drops every field with an underscore in its name by default.
func TestEdgeDropsUnderscoredForwarding(t *testing.T) {
	up, heads := rawUpstream(t)
	e := startTestEdge(t, map[string]string{"fwd.p2p": up}, Deps{})
	httpAddr, _ := e.s.Addrs()
	c := sendRaw(t, httpAddr.String(), "GET / HTTP/1.1\r\nHost: fwd.p2p\r\nX_Forwarded_For: 192.0.2.6\r\n"+
		"x-forwarded_proto: https\r\nX_FORWARDED-HOST: evil.example\r\nX_Other: kept\r\n\r\n")
	if st, _, _ := answer(t, c); st != 200 {
		t.Fatalf("%d", st)
	}
	h := <-heads
	if l := strings.ToLower(h); strings.Contains(l, "_forwarded") || strings.Contains(l, "forwarded_") ||
		!strings.Contains(h, "\r\nX-Forwarded-For: 127.0.0.1\r\n") || !strings.Contains(l, "\r\nx_other: kept\r\n") {
		t.Fatalf("the upstream got %q", h)
	}
}

// The same over HTTP/2 and HTTP/3, on the pool's path (a GET) and on
// ReverseProxy's (an upload of unknown length).
func TestEdgeDropsUnderscoredForwardingH2H3(t *testing.T) {
	up, heads := rawUpstream(t)
	e := startTestEdge(t, map[string]string{"fwd.p2p": up}, Deps{})
	h3 := &http.Client{Timeout: 10 * time.Second, Transport: e.h3(t, "fwd.p2p")}
	for _, tc := range []struct {
		how  string
		c    *http.Client
		body io.Reader
	}{{"HTTP/2 GET", e.c, nil}, {"HTTP/3 GET", h3, nil}, {"HTTP/2 upload", e.c, io.MultiReader(strings.NewReader("x"))}} {
		method := "GET"
		if tc.body != nil {
			method = "POST"
		}
		req, _ := http.NewRequest(method, "https://fwd.p2p/", tc.body)
		req.Header["X_forwarded_for"] = []string{"192.0.2.6"}
		req.Header["X-forwarded_proto"] = []string{"http"}
		req.Header["X_other"] = []string{"kept"}
		resp, err := tc.c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.how, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		h := <-heads
		if l := strings.ToLower(h); resp.StatusCode != 200 || strings.Contains(l, "_forwarded") || strings.Contains(l, "forwarded_") ||
			!strings.Contains(l, "\r\nx-forwarded-for: 127.0.0.1\r\n") || !strings.Contains(l, "\r\nx_other: kept\r\n") {
			t.Fatalf("%s: %d, the upstream got %q", tc.how, resp.StatusCode, h)
		}
	}
}
