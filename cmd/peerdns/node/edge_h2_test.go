package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"peerdns/internal/testutil"
)

// h2Client speaks HTTP/2 (ALPN h2) to the edge at addr, whatever the
// URL's host, verifying against pool.
func h2Client(addr string, pool *x509.CertPool) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	var p http.Protocols
	p.SetHTTP2(true)
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		DialContext:     func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) },
		TLSClientConfig: &tls.Config{RootCAs: pool},
		Protocols:       &p,
	}}
}

// h3Client speaks HTTP/3 (quic-go's client, with qc: nil for its
// defaults) to the edge's UDP port at addr, whatever the URL's host.
func h3Client(t *testing.T, addr string, pool *x509.CertPool, qc *quic.Config) *http.Client {
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		QUICConfig:      qc,
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return quic.DialAddrEarly(ctx, addr, tc, qc)
		},
	}
	t.Cleanup(func() { tr.Close() })
	return &http.Client{Timeout: 15 * time.Second, Transport: tr}
}

// rawCodec passes gRPC messages as bytes (no generated code needed).
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

// grpcEcho serves edge.Echo, in h2c or, with cert, in TLS: Unary
// answers "echo:"+message, Bidi answers each message as it comes, Die
// sends one message and then stops the whole server once the client's
// second message says the first came (its connections close
// mid-stream).
func grpcEcho(t *testing.T, cert *tls.Certificate) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := []grpc.ServerOption{grpc.ForceServerCodec(rawCodec{})}
	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewServerTLSFromCert(cert)))
	}
	srv := grpc.NewServer(opts...)
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "edge.Echo", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Unary", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			out := append([]byte("echo:"), in...)
			return &out, nil
		}}},
		Streams: []grpc.StreamDesc{
			{StreamName: "Bidi", ServerStreams: true, ClientStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
				for {
					var in []byte
					if err := st.RecvMsg(&in); err == io.EOF {
						return nil
					} else if err != nil {
						return err
					}
					out := append([]byte("echo:"), in...)
					if err := st.SendMsg(&out); err != nil {
						return err
					}
				}
			}},
			{StreamName: "Die", ServerStreams: true, ClientStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
				var in []byte
				if err := st.RecvMsg(&in); err != nil {
					return err
				}
				out := []byte("last words")
				if err := st.SendMsg(&out); err != nil {
					return err
				}
				// The client's second message says the first came.
				if err := st.RecvMsg(&in); err != nil {
					return err
				}
				go srv.Stop()
				<-st.Context().Done()
				return st.Context().Err()
			}},
		},
	}, struct{}{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().(*net.TCPAddr).Port
}

// grpcConn is a gRPC client of authority through the edge's HTTPS
// address (TLS verified against pool, SNI authority).
func grpcConn(t *testing.T, httpsAddr, authority string, pool *x509.CertPool) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.Dial("passthrough:///"+authority,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: authority})),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", httpsAddr)
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// grpcEchoes calls edge.Echo through cc: a unary call, then a
// bidirectional stream of five messages, each answered while the
// stream is open, ended with status OK.
func grpcEchoes(ctx context.Context, t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	in, out := []byte("ping"), []byte(nil)
	if err := cc.Invoke(ctx, "/edge.Echo/Unary", &in, &out); err != nil || string(out) != "echo:ping" {
		t.Fatalf("%s unary: %v %q", cc.Target(), err, out)
	}
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/edge.Echo/Bidi")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		m := []byte(fmt.Sprintf("m%d", i))
		if err := st.SendMsg(&m); err != nil {
			t.Fatal(err)
		}
		var got []byte
		if err := st.RecvMsg(&got); err != nil || string(got) != "echo:"+string(m) {
			t.Fatalf("%s stream message %d: %v %q", cc.Target(), i, err, got)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var none []byte
	if err := st.RecvMsg(&none); err != io.EOF {
		t.Fatalf("%s stream end: %v, want io.EOF (status OK)", cc.Target(), err)
	}
}

// Two nodes: A holds an HTTP/1.1-only backend and gRPC servers (h2c, and
// one in TLS claimed with ssl: true) behind tunnel servers; B's edge serves them to HTTP/2 clients (Go's
// and curl), to HTTP/3 (quic-go's client), and gRPC unary and
// bidirectional streaming through the tunnel; an upstream that dies
// mid-stream ends the call with a status; DoH answers over HTTP/2 (Go
// and kdig) and HTTP/3; HTTP/1.1 and HTTP/2 answers advertise HTTP/3.
func TestEdgeHTTP2HTTP3AndGRPC(t *testing.T) {
	nodes := newNetwork(t, 2)
	a, b := nodes[0], nodes[1]

	var h1 http.Protocols
	h1.SetHTTP1(true)
	hs := &http.Server{Protocols: &h1, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/count" {
			n, err := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "%d %v", n, err)
			return
		}
		fmt.Fprintf(w, "hello %s %s host=%s xff=%s proto=%s", r.Proto, r.URL.Path, r.Host, r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"))
	})}
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(hln) }()
	t.Cleanup(func() { hs.Close() })
	mustJSON(t, "POST", "http://"+b.AdminAddr()+"/api/add-local-dns", `{"name":"nas.lan","type":"A","ttl":120,"data":"192.168.1.20"}`, 200, nil)

	domains := map[string]int{"h1.p2p": hln.Addr().(*net.TCPAddr).Port, "grpc.p2p": grpcEcho(t, nil), "die.p2p": grpcEcho(t, nil), "die3.p2p": grpcEcho(t, nil)}
	urls := map[string]string{}
	for d, port := range domains {
		_, urls[d] = tunnelServerURL(t, a, fmt.Sprintf(`{"name":%q,"port":%d,"domain":%q}`, strings.TrimSuffix(d, ".p2p"), port, d))
	}
	// A gRPC server in TLS (a leaf of A's CA; the edge does not verify
	// an upstream's certificate), claimed with ssl: true.
	leaf, err := a.CA().Certificate("grpcs.p2p", netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"grpcs.p2p", "dies.p2p"} {
		_, urls[d] = tunnelServerURL(t, a, fmt.Sprintf(`{"name":%q,"port":%d}`, strings.TrimSuffix(d, ".p2p"), grpcEcho(t, leaf)))
		mustJSON(t, "POST", "http://"+a.AdminAddr()+"/api/add-domain", `{"domain":"`+d+`","hash":"`+urls[d]+`","ssl":true}`, 200, nil)
	}
	for d, url := range urls {
		testutil.Eventually(t, 20*time.Second, func() error {
			cs := consensusOn(t, b, d)
			if cs.Status != "resolved" || cs.Hash == nil || *cs.Hash != url {
				return fmt.Errorf("%s on B: %+v", d, cs)
			}
			return nil
		})
	}

	_, httpsAddr := b.EdgeAddrs()
	_, port, _ := net.SplitHostPort(httpsAddr)
	pool := rootPool(t, b)
	c2 := h2Client(httpsAddr, pool)
	altSvc := `h3=":` + port + `"`

	// HTTP/2 to an HTTP/1.1 upstream, through the tunnel.
	testutil.Eventually(t, 20*time.Second, func() error {
		resp, err := c2.Get("https://h1.p2p/two")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 || string(body) != "hello HTTP/1.1 /two host=h1.p2p xff=127.0.0.1 proto=https" {
			return fmt.Errorf("%s %d %q", resp.Proto, resp.StatusCode, body)
		}
		if !strings.HasPrefix(resp.Header.Get("Alt-Svc"), altSvc) {
			return fmt.Errorf("Alt-Svc %q, want %s", resp.Header.Get("Alt-Svc"), altSvc)
		}
		// An upstream's answer without a Server field names the edge,
		// as on HTTP/1.1.
		if got := resp.Header.Values("Server"); len(got) != 1 || got[0] != "peerdns" {
			return fmt.Errorf("Server %q, want peerdns", got)
		}
		return nil
	})
	// A 3 MiB upload streams through.
	resp, err := c2.Post("https://h1.p2p/count", "application/octet-stream", io.LimitReader(zeros{}, 3<<20))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != fmt.Sprintf("%d <nil>", 3<<20) {
		t.Fatalf("upload over HTTP/2: %d %q", resp.StatusCode, body)
	}
	// Routing is by :authority: a name not served here is 404.
	req, _ := http.NewRequest("GET", "https://h1.p2p/x", nil)
	req.Host = "nowhere.p2p"
	if resp, err := c2.Do(req); err != nil || resp.StatusCode != 404 || resp.Header.Get("Server") != "peerdns" {
		t.Fatalf("unknown :authority: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// HTTP/1.1 answers on TLS advertise HTTP/3 too.
	if code, _, hdr := get(t, edgeClient(httpsAddr, pool), "GET", "https://h1.p2p/one", "", nil); code != 200 || !strings.HasPrefix(hdr.Get("Alt-Svc"), altSvc) {
		t.Fatalf("HTTP/1.1: %d Alt-Svc %q", code, hdr.Get("Alt-Svc"))
	}

	// curl --http2, as a user would.
	if curl, err := exec.LookPath("curl"); err == nil {
		out, err := exec.Command(curl, "-sS", "--http2", "--max-time", "10", "--cacert", b.CA().RootPath(), "-w", " %{http_version}",
			"--resolve", "h1.p2p:"+port+":127.0.0.1", "https://h1.p2p:"+port+"/curl").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "hello HTTP/1.1 /curl host=h1.p2p:"+port) || !strings.HasSuffix(string(out), " 2") {
			t.Fatalf("curl --http2: %v %s", err, out)
		}
	} else {
		t.Log("curl --http2 not run: curl is not installed (apt-get install curl)")
	}

	// DoH over HTTP/2.
	doh := func(c *http.Client, url string, proto int) {
		t.Helper()
		req, _ := http.NewRequest("POST", url, bytes.NewReader(dohQuery(t, "nas.lan", dns.TypeA)))
		req.Header.Set("Content-Type", "application/dns-message")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := new(dns.Msg)
		if resp.ProtoMajor != proto || resp.StatusCode != 200 || m.Unpack(b) != nil || len(m.Answer) != 1 || !strings.Contains(m.Answer[0].String(), "192.168.1.20") {
			t.Fatalf("DoH over %s: %d %q", resp.Proto, resp.StatusCode, b)
		}
		if resp.Header.Get("Cache-Control") != "max-age=120" {
			t.Fatalf("DoH over %s: Cache-Control %q", resp.Proto, resp.Header.Get("Cache-Control"))
		}
	}
	doh(c2, "https://admin.p2p/dns-query", 2)
	// DoH at the edge's address, as a browser's secure-DNS setting names
	// it where no resolver knows admin.p2p yet: the admin domain's
	// certificate names the address; the API's other paths stay under
	// its domain.
	atAddr := "https://" + httpsAddr
	ca := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	defer ca.CloseIdleConnections()
	doh(ca, atAddr+"/dns-query", 2)
	c1 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool},
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}} // HTTP/1.1 only
	defer c1.CloseIdleConnections()
	doh(c1, atAddr+"/dns-query", 1)
	if resp, err := ca.Get(atAddr + "/api/health"); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != 404 {
		t.Fatalf("the admin API at the edge's address: %d, want 404", resp.StatusCode)
	}
	// The README's kdig command (kdig speaks DoH over HTTP/2 only).
	if kdig, err := exec.LookPath("kdig"); err == nil {
		out, err := exec.Command(kdig, "@127.0.0.1", "-p", port, "+https=/dns-query", "+tls-ca="+b.CA().RootPath(),
			"+tls-hostname=admin.p2p", "+short", "+timeout=5", "nas.lan").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "192.168.1.20" {
			t.Fatalf("kdig +https: %v %s", err, out)
		}
	} else {
		t.Log("kdig DoH not run: kdig is not installed (apt-get install knot-dnsutils)")
	}

	// HTTP/3 on the same port (UDP): routes and DoH.
	c3 := h3Client(t, httpsAddr, pool, nil)
	resp, err = c3.Get("https://h1.p2p/three")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 3 || string(body) != "hello HTTP/1.1 /three host=h1.p2p xff=127.0.0.1 proto=https" || resp.Header.Get("Server") != "peerdns" {
		t.Fatalf("HTTP/3: %s %d %q", resp.Proto, resp.StatusCode, body)
	}
	doh(c3, "https://admin.p2p/dns-query", 3)
	doh(c3, atAddr+"/dns-query", 3)

	// gRPC through the tunnel, to an h2c upstream and to one in TLS
	// (ALPN h2): unary, then a bidirectional stream whose answers come
	// while it is open.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	in, out := []byte("ping"), []byte(nil)
	grpcEchoes(ctx, t, grpcConn(t, httpsAddr, "grpc.p2p", pool))
	grpcEchoes(ctx, t, grpcConn(t, httpsAddr, "grpcs.p2p", pool))

	// An upstream that closes mid-stream, in h2c and in TLS: the call
	// ends with a status.
	var dc *grpc.ClientConn
	for _, d := range []string{"dies.p2p", "die.p2p"} {
		dc = grpcConn(t, httpsAddr, d, pool)
		ds, err := dc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/edge.Echo/Die")
		if err != nil {
			t.Fatal(err)
		}
		if err := ds.SendMsg(&in); err != nil {
			t.Fatal(err)
		}
		var last []byte
		if err := ds.RecvMsg(&last); err != nil || string(last) != "last words" {
			t.Fatalf("%s: first message %v %q", d, err, last)
		}
		if err := ds.SendMsg(&in); err != nil {
			t.Fatal(err)
		}
		err = ds.RecvMsg(&last)
		if s, _ := status.FromError(err); s.Code() != codes.Unavailable {
			t.Fatalf("%s: upstream closed mid-stream: %v (code %v), want Unavailable", d, err, s.Code())
		}
	}
	// The same over HTTP/3, its gRPC frames written and read by hand
	// (grpc-go has no HTTP/3 client): the status comes in the trailers.
	grpcDiesOverH3(ctx, t, c3)
	// And one that cannot be reached at all (its server is gone now).
	err = dc.Invoke(ctx, "/edge.Echo/Unary", &in, &out)
	if s, _ := status.FromError(err); s.Code() != codes.Unavailable {
		t.Fatalf("unreachable gRPC upstream: %v, want Unavailable", err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("gRPC calls took the whole deadline")
	}
}

// grpcDiesOverH3 calls die3.p2p's Die over HTTP/3 with c, sends a
// second message once the first answer came, and wants the call ended
// with grpc-status 14 (UNAVAILABLE) in the trailers.
func grpcDiesOverH3(ctx context.Context, t *testing.T, c *http.Client) {
	t.Helper()
	frame := func(msg string) []byte { // uncompressed, 4-byte big-endian length
		return append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...)
	}
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequestWithContext(ctx, "POST", "https://die3.p2p/edge.Echo/Die", pr)
	req.Header.Set("Content-Type", "application/grpc+raw")
	req.Header.Set("TE", "trailers")
	go func() { _, _ = pw.Write(frame("ping")) }()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, len(frame("last words")))
	if _, err := io.ReadFull(resp.Body, first); err != nil || resp.ProtoMajor != 3 || !bytes.Equal(first, frame("last words")) {
		t.Fatalf("HTTP/3 gRPC die: %s %d, first message %q %v", resp.Proto, resp.StatusCode, first, err)
	}
	if _, err := pw.Write(frame("ping")); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(resp.Body)
	if err != nil || len(rest) != 0 || resp.Trailer.Get("Grpc-Status") != "14" {
		t.Fatalf("HTTP/3 gRPC, upstream closed mid-stream: rest %q %v, trailers %v; want grpc-status 14", rest, err, resp.Trailer)
	}
}
