package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"peerdns/internal/testutil"
)

// rawUpstream answers every request 200 "ok" and hands on the bytes of
// each request it got (its head, and its body when it has one). It
// reads the whole request before it answers and closes: a close with
// the body's bytes still unread makes the kernel reset the connection,
// which the edge may see before the answer (a 502).
func rawUpstream(t *testing.T) (addr string, heads <-chan string) {
	got := make(chan string, 16)
	a := testutil.ServeTCP(t, func(c net.Conn) {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got <- readRequest(c)
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	})
	return a.String(), got
}

// readRequest reads one request from c: its head, then a chunked body to
// its last chunk or a body of the head's Content-Length; what came when
// c fails or goes quiet past its deadline.
func readRequest(c net.Conn) string {
	var all []byte
	b := make([]byte, 4096)
	for !requestRead(all) {
		n, err := c.Read(b)
		all = append(all, b[:n]...)
		if err != nil {
			break
		}
	}
	return string(all)
}

// requestRead reports whether all holds a whole request.
func requestRead(all []byte) bool {
	end := bytes.Index(all, []byte("\r\n\r\n"))
	if end < 0 {
		return false
	}
	head, body := strings.ToLower(string(all[:end])), string(all[end+4:])
	if strings.Contains(head, "\r\ntransfer-encoding: chunked") {
		return body == "0\r\n\r\n" || strings.HasSuffix(body, "\r\n0\r\n\r\n")
	}
	if i := strings.Index(head, "\r\ncontent-length:"); i >= 0 {
		v := strings.TrimSpace(strings.SplitN(head[i+len("\r\ncontent-length:"):], "\r\n", 2)[0])
		n, err := strconv.Atoi(v)
		return err != nil || len(body) >= n
	}
	return true
}

// h2Status sends one request of the given header fields on a connection
// of its own and returns the answer's :status ("" for a reset stream or
// connection).
func h2Status(t *testing.T, addr string, conf *tls.Config, fields ...[2]string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range fields {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("%v: %v", fields, err)
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			return f.PseudoValue("status")
		case *http2.RSTStreamFrame, *http2.GoAwayFrame:
			return ""
		}
	}
}

// An HTTP/2 or HTTP/3 request whose :method or :path could not be
// written into an HTTP/1.1 request line as it came (spaces, an absolute
// URI, a fragment, "*" with GET, a method that is not a token) is 400
// and never reaches the upstream; a :path with its spaces
// percent-encoded, or with UTF-8 and quotes in it, goes through as it
// came. So for a field value that starts or ends with a space or tab
// (400), and one with spaces inside it (passed); and for a Host field
// that names another authority than :authority, or comes twice (400);
// and for an :authority that is not a host name and port, though it ends
// in a served one (400: "evil.example,x.f.p2p" went upstream as the
// Host and the X-Forwarded-Host of f.p2p's site).
// CONNECT and TRACE are 501, as over HTTP/1.1. (OPTIONS * net/http
// answers itself.)
func TestEdgeRefusesUnfitTargets(t *testing.T) {
	up, heads := rawUpstream(t)
	e := startTestEdge(t, map[string]string{"f.p2p": up}, Deps{})
	_, httpsAddr := e.s.Addrs()
	conf := &tls.Config{RootCAs: e.s.d.CA.Pool(), ServerName: "f.p2p", NextProtos: []string{"h2"}}
	at := func(authority string) [][2]string {
		return [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", authority}, {":path", "/"}}
	}
	req := func(method, path string) [][2]string {
		return [][2]string{{":method", method}, {":scheme", "https"}, {":authority", "f.p2p"}, {":path", path}}
	}
	for _, f := range [][][2]string{
		req("GET", "/a b"),
		req("GET", "/a?x= HTTP/1.1"),
		req("GET", "http://other.p2p/x"),
		req("GET", "/a#frag"),
		req("GET", "*"),
		req("GET x", "/"),
		req("GE(T", "/"),
		append(req("GET", "/"), [2]string{"x-pad", " v"}),
		append(req("GET", "/"), [2]string{"x-pad", "v\t"}),
		append(req("GET", "/"), [2]string{"host", "other.p2p"}),
		append(req("GET", "/"), [2]string{"host", "f.p2p"}, [2]string{"host", "f.p2p"}),
		at("evil.example/x.f.p2p"),
		at("evil.example,x.f.p2p"),
		at("evil.example x.f.p2p"),
		at("evil.example?x.f.p2p"),
		at("x.f.p2p:44x"),
		at("[::1]x.f.p2p"),
	} {
		if st := h2Status(t, httpsAddr.String(), conf, f...); st != "400" {
			t.Fatalf("%v: status %q, want 400", f, st)
		}
	}
	for _, f := range [][][2]string{
		{{":method", "CONNECT"}, {":authority", "f.p2p:443"}},
		req("TRACE", "/"),
	} {
		if st := h2Status(t, httpsAddr.String(), conf, f...); st != "501" {
			t.Fatalf("%v: status %q, want 501", f, st)
		}
	}
	select {
	case h := <-heads:
		t.Fatalf("the upstream got %q", h)
	default:
	}
	for _, tc := range []struct {
		method, path, line string
	}{
		{"GET", "/a%20b?x=%20y", "GET /a%20b?x=%20y HTTP/1.1\r\n"},
		{"GET", "/caf\xc3\xa9?q=\"x\"", "GET /caf\xc3\xa9?q=\"x\" HTTP/1.1\r\n"},
	} {
		if st := h2Status(t, httpsAddr.String(), conf, req(tc.method, tc.path)...); st != "200" {
			t.Fatalf("%s %s: status %q, want 200", tc.method, tc.path, st)
		}
		if h := <-heads; len(h) < len(tc.line) || h[:len(tc.line)] != tc.line {
			t.Fatalf("%s %s: the upstream got %q", tc.method, tc.path, h)
		}
	}

	// A value with spaces inside it goes through as it came.
	if st := h2Status(t, httpsAddr.String(), conf, append(req("GET", "/"), [2]string{"x-pad", "a \tb"})...); st != "200" {
		t.Fatalf("a value with inner spaces: status %q, want 200", st)
	}
	if h := <-heads; !strings.Contains(h, "\r\nX-Pad: a \tb\r\n") {
		t.Fatalf("a value with inner spaces: the upstream got %q", h)
	}

	// A Host beside :authority that names it (in any case) goes through,
	// and a Host alone stands for :authority; the upstream gets the one
	// name either way.
	for _, f := range [][][2]string{
		append(req("GET", "/"), [2]string{"host", "F.p2p"}),
		{{":method", "GET"}, {":scheme", "https"}, {":path", "/"}, {"host", "f.p2p"}},
	} {
		if st := h2Status(t, httpsAddr.String(), conf, f...); st != "200" {
			t.Fatalf("%v: status %q, want 200", f, st)
		}
		if h := <-heads; strings.Count(strings.ToLower(h), "\r\nhost: ") != 1 || !strings.Contains(strings.ToLower(h), "\r\nhost: f.p2p\r\n") {
			t.Fatalf("%v: the upstream got %q", f, h)
		}
	}

	// HTTP/3: the same check (quic-go's client writes an opaque URL's
	// path as it is).
	tr := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: e.s.d.CA.Pool(), ServerName: "f.p2p"},
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return quic.DialAddr(ctx, httpsAddr.String(), tc, qc)
		}}
	t.Cleanup(func() { tr.Close() })
	r3, _ := http.NewRequest("GET", "https://f.p2p/", nil)
	r3.URL = &url.URL{Scheme: "https", Host: "f.p2p", Opaque: "/a?x= HTTP/1.1"}
	resp, err := tr.RoundTrip(r3)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("HTTP/3 :path with a space: %d, want 400", resp.StatusCode)
	}
	r3, _ = http.NewRequest("GET", "https://f.p2p/", nil)
	r3.Header.Set("X-Pad", "v ")
	if resp, err = tr.RoundTrip(r3); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("HTTP/3 padded field value: %d, want 400", resp.StatusCode)
	}
	r3, _ = http.NewRequest("GET", "https://f.p2p/", nil)
	r3.Host = "evil.example,x.f.p2p"
	if resp, err = tr.RoundTrip(r3); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("HTTP/3 :authority that is no host name: %d, want 400", resp.StatusCode)
	}
	r3, _ = http.NewRequest("TRACE", "https://f.p2p/", nil)
	if resp, err = tr.RoundTrip(r3); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 501 {
		t.Fatalf("HTTP/3 TRACE: %d, want 501", resp.StatusCode)
	}
	select {
	case h := <-heads:
		t.Fatalf("the upstream got %q", h)
	default:
	}
}
