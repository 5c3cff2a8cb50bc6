package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"
)

// An upstream's Alt-Svc names its own ports, behind the tunnel, where no
// client can follow it: the edge sends its own instead (HTTP/3 on its
// HTTPS port) over HTTP/1.1 and HTTP/2 in TLS, none over HTTP/3, and
// none at all when it has no HTTP/3, whichever path the answer takes
// (the HTTP/1.1 pool, or ReverseProxy for gRPC).
func TestUpstreamAltSvcNotPassed(t *testing.T) {
	up := serveUpstream(t, true, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Alt-Svc", `h3=":443"; ma=2592000`)
		if isGRPC(r) {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "0")
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	for _, withH3 := range []bool{true, false} {
		e := startTestEdge(t, map[string]string{"up.p2p": up}, Deps{NoHTTP3: !withH3})
		_, httpsAddr := e.s.Addrs()
		var want []string
		if withH3 {
			want = []string{`h3=":` + strconv.Itoa(httpsAddr.(*net.TCPAddr).Port) + `"; ma=86400`}
		}
		check := func(how string, resp *http.Response, err error, want []string) {
			t.Helper()
			if err != nil {
				t.Fatalf("HTTP/3 %v, %s: %v", withH3, how, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if got := resp.Header["Alt-Svc"]; resp.StatusCode != 200 || strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("HTTP/3 %v, %s: %d, Alt-Svc %q, want %q", withH3, how, resp.StatusCode, got, want)
			}
		}

		h1 := &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", httpsAddr.String())
			},
			TLSClientConfig: &tls.Config{RootCAs: e.s.d.CA.Pool()},
			TLSNextProto:    map[string]func(string, *tls.Conn) http.RoundTripper{}, // HTTP/1.1 only
		}
		t.Cleanup(h1.CloseIdleConnections)
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: h1}).Get("https://up.p2p/one")
		check("HTTP/1.1", resp, err, want)

		resp, err = e.c.Get("https://up.p2p/two")
		check("HTTP/2", resp, err, want)

		req, _ := http.NewRequest("POST", "https://up.p2p/edge.Echo/Unary", bytes.NewReader([]byte{0, 0, 0, 0, 1, 'x'}))
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("TE", "trailers")
		resp, err = e.c.Do(req)
		check("HTTP/2 gRPC", resp, err, want)

		if withH3 {
			resp, err = (&http.Client{Timeout: 10 * time.Second, Transport: e.h3(t, "up.p2p")}).Get("https://up.p2p/three")
			check("HTTP/3", resp, err, nil)
		}
	}
}

// An HTTP/2 answer that came after an informational one (a 103 Early
// Hints, on the ReverseProxy path a body over SmallBody takes) still
// carries the edge's Alt-Svc, and the 103 passes on without the
// upstream's Alt-Svc, as the final answer does.
func TestAltSvcAfterEarlyHints(t *testing.T) {
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.Header().Set("Alt-Svc", `h3=":443"; ma=2592000`)
		w.WriteHeader(http.StatusEarlyHints)
		_, _ = io.WriteString(w, "ok")
	})
	e := startTestEdge(t, map[string]string{"up.p2p": up}, Deps{})
	_, httpsAddr := e.s.Addrs()
	want := `h3=":` + strconv.Itoa(httpsAddr.(*net.TCPAddr).Port) + `"; ma=86400`
	var hints []textproto.MIMEHeader
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		if code == http.StatusEarlyHints {
			hints = append(hints, h)
		}
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
		"POST", "https://up.p2p/upload", bytes.NewReader(make([]byte, SmallBody+1)))
	resp, err := e.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" || resp.ProtoMajor != 2 {
		t.Fatalf("%s %d %q", resp.Proto, resp.StatusCode, b)
	}
	if got := resp.Header["Alt-Svc"]; len(got) != 1 || got[0] != want {
		t.Errorf("answer after a 103: Alt-Svc %q, want %q", got, want)
	}
	if len(hints) != 1 || hints[0].Get("Link") == "" {
		t.Fatalf("103s seen: %v", hints)
	}
	for _, v := range hints[0]["Alt-Svc"] {
		if strings.Contains(v, `":443"`) {
			t.Errorf("103 passed the upstream's Alt-Svc %q", v)
		}
	}
}

// Over plain HTTP too an upstream's Alt-Svc is not passed on, whether
// its answer came by the pool or after a streamed upload.
func TestUpstreamAltSvcNotPassedPlain(t *testing.T) {
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Alt-Svc", `h3=":443"; ma=2592000`)
		_, _ = io.WriteString(w, "ok")
	})
	e := startTestEdge(t, map[string]string{"up.p2p": up}, Deps{})
	httpAddr, _ := e.s.Addrs()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	for _, n := range []int{0, SmallBody + 1} {
		req, _ := http.NewRequest("POST", "http://"+httpAddr.String()+"/", bytes.NewReader(make([]byte, n)))
		req.Host = "up.p2p"
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("body of %d: %d %q", n, resp.StatusCode, b)
		}
		if got := resp.Header["Alt-Svc"]; got != nil {
			t.Errorf("body of %d: Alt-Svc %q passed on over plain HTTP", n, got)
		}
	}
}
