package node

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"peerdns/http/proxy"
	"peerdns/internal/testutil"
)

// edgeClient sends every request to addr (the edge proxy), whatever the
// URL's host, as a browser whose DNS points the name at the node would;
// TLS verifies against pool with the URL's host as SNI.
func edgeClient(addr string, pool *x509.CertPool) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		DialContext:     func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) },
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}
}

// rootPool is a pool with n's root CA (DATA/ca/root.pem), as a user who
// trusts the node has.
func rootPool(t *testing.T, n *Node) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	rootPEM, err := os.ReadFile(n.CA().RootPath())
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(rootPEM)
	return pool
}

// edgeDials are raw connections to n's edge proxy: plain TCP to its HTTP
// listener, and TLS to its HTTPS listener with name as SNI, verified
// against n's root CA.
func edgeDials(t *testing.T, n *Node, name string) (plain, secure func() (net.Conn, error)) {
	t.Helper()
	httpAddr, httpsAddr := n.EdgeAddrs()
	pool := rootPool(t, n)
	plain = func() (net.Conn, error) { return net.Dial("tcp", httpAddr) }
	secure = func() (net.Conn, error) {
		return tls.Dial("tcp", httpsAddr, &tls.Config{RootCAs: pool, ServerName: name})
	}
	return plain, secure
}

// waitServed polls url through c until it answers 200.
func waitServed(t *testing.T, c *http.Client, url string) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() error {
		r, err := c.Get(url)
		if err != nil {
			return err
		}
		r.Body.Close()
		if r.StatusCode != 200 {
			return fmt.Errorf("%s: status %d", url, r.StatusCode)
		}
		return nil
	})
}

func get(t *testing.T, c *http.Client, method, url, body string, hdr map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// Two nodes: A serves an HTTP and WebSocket backend through a tunnel
// server and claims its domain; B's edge proxy reaches it by Host over
// HTTP and by SNI over HTTPS with a certificate from B's own CA; the
// admin domain and a plugin are served by the proxy too; 502, 504 and
// 404 come as small pages.
func TestEdgeProxy(t *testing.T) {
	nodes := newNetwork(t, 2)
	a, b := nodes[0], nodes[1]

	up := websocket.Upgrader{}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ws":
			// The forwarding headers it got, in the 101's headers.
			seen := http.Header{"X-Seen": {fmt.Sprintf("xff=%s proto=%s host=%s", r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-Host"))}}
			c, err := up.Upgrade(w, r, seen)
			if err != nil {
				return
			}
			defer c.Close()
			for {
				mt, m, err := c.ReadMessage()
				if err != nil {
					return
				}
				_ = c.WriteMessage(mt, append([]byte("echo: "), m...))
			}
		case "/slow":
			<-r.Context().Done()
		default:
			fmt.Fprintf(w, "hello %s host=%s xff=%s proto=%s", r.URL.Path, r.Host, r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"))
		}
	})}
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(hln) }()
	t.Cleanup(func() { hs.Close() })
	sid, url := tunnelServerURL(t, a, fmt.Sprintf(`{"name":"site","port":%d,"domain":"site.p2p"}`, hln.Addr().(*net.TCPAddr).Port))
	testutil.Eventually(t, 20*time.Second, func() error {
		cs := consensusOn(t, b, "site.p2p")
		if cs.Status != "resolved" || cs.Hash == nil || *cs.Hash != url {
			return fmt.Errorf("site.p2p on B: %+v", cs)
		}
		return nil
	})

	httpAddr, httpsAddr := b.EdgeAddrs()
	plain := edgeClient(httpAddr, nil)
	pool := rootPool(t, b)
	secure := edgeClient(httpsAddr, pool)

	// HTTP by Host (upper case, port and trailing dot are the same host).
	for _, host := range []string{"site.p2p", "SITE.p2p.", "www.site.p2p"} {
		testutil.Eventually(t, 20*time.Second, func() error {
			code, body, _ := get(t, plain, "GET", "http://"+host+"/hello", "", nil)
			// Host reaches the backend as the client sent it.
			if code != 200 || !strings.HasPrefix(body, "hello /hello host="+strings.ToLower(host)) || !strings.Contains(body, "xff=127.0.0.1") || !strings.HasSuffix(body, "proto=http") {
				return fmt.Errorf("%s: %d %s", host, code, body)
			}
			return nil
		})
	}
	// Requests through B's edge went over a tunnel stream: none is an
	// exchange with a server on B (the governor's parallel work). Through
	// A's own edge, to its own server, each is.
	if n := b.EdgeLocalExchanges(); n != 0 {
		t.Errorf("B counted %d local exchanges for requests through a tunnel", n)
	}
	aHTTP, _ := a.EdgeAddrs()
	before := a.EdgeLocalExchanges()
	testutil.Eventually(t, 20*time.Second, func() error {
		if code, body, _ := get(t, edgeClient(aHTTP, nil), "GET", "http://site.p2p/local", "", nil); code != 200 || !strings.HasPrefix(body, "hello /local") {
			return fmt.Errorf("through A's edge: %d %s", code, body)
		}
		return nil
	})
	if n := a.EdgeLocalExchanges() - before; n < 1 {
		t.Errorf("A counted %d local exchanges for a request to its own server, want at least 1", n)
	}
	// An HTTP/2 request to the same server is not: an HTTP/2 connection
	// hands each request between goroutines (its reader, the stream's
	// handler, its writer), not served start to end by one.
	{
		_, aHTTPS := a.EdgeAddrs()
		before := a.EdgeLocalExchanges()
		if code, body, _ := get(t, h2Client(aHTTPS, rootPool(t, a)), "GET", "https://site.p2p/local-h2", "", nil); code != 200 || !strings.HasPrefix(body, "hello /local-h2") {
			t.Fatalf("HTTP/2 through A's edge: %d %s", code, body)
		}
		if n := a.EdgeLocalExchanges() - before; n != 0 {
			t.Errorf("A counted %d local exchanges for an HTTP/2 request to its own server, want 0", n)
		}
	}

	// HTTPS by SNI, verified against B's root.pem.
	code, body, _ := get(t, secure, "GET", "https://site.p2p/tls", "", nil)
	if code != 200 || !strings.HasSuffix(body, "proto=https") {
		t.Fatalf("https: %d %s", code, body)
	}
	// The same with curl, as a user would (--cacert the node's root.pem).
	if curl, err := exec.LookPath("curl"); err == nil {
		_, port, _ := net.SplitHostPort(httpsAddr)
		out, err := exec.Command(curl, "-sS", "--max-time", "10", "--cacert", b.CA().RootPath(),
			"--resolve", "site.p2p:"+port+":127.0.0.1", "https://site.p2p:"+port+"/curl").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "hello /curl host=site.p2p:"+port) || !strings.HasSuffix(string(out), "proto=https") {
			t.Fatalf("curl --cacert: %v %s", err, out)
		}
	} else {
		t.Log("curl is not installed (apt-get install curl): the curl --cacert check is left out")
	}
	conn, err := tls.Dial("tcp", httpsAddr, &tls.Config{RootCAs: pool, ServerName: "site.p2p"})
	if err != nil {
		t.Fatal(err)
	}
	leaf := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	if strings.Join(leaf.DNSNames, ",") != "site.p2p,*.site.p2p" || len(leaf.IPAddresses) != 1 {
		t.Fatalf("leaf names %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	// No certificate for a name this node does not serve.
	if _, err := tls.Dial("tcp", httpsAddr, &tls.Config{RootCAs: pool, ServerName: "stranger.p2p"}); err == nil {
		t.Fatal("a certificate was issued for a name not served here")
	}

	// WebSocket through the proxy, both directions.
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", httpAddr)
	}, HandshakeTimeout: 10 * time.Second}
	ws, wsResp, err := d.Dial("ws://site.p2p/ws", http.Header{"X-Forwarded-For": {"10.0.0.7"}})
	if err != nil {
		t.Fatalf("websocket through the proxy: %v", err)
	}
	if got, want := wsResp.Header.Get("X-Seen"), "xff=10.0.0.7, 127.0.0.1 proto=http host=site.p2p"; got != want {
		t.Fatalf("the upgrade reached the backend with %q, want %q", got, want)
	}
	for _, m := range []string{"one", "two"} {
		if err := ws.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, got, err := ws.ReadMessage()
		if err != nil || string(got) != "echo: "+m {
			t.Fatalf("ws echo: %q %v", got, err)
		}
	}
	ws.Close()

	// The admin domain over HTTPS, and a plugin with its token rules.
	code, body, _ = get(t, secure, "GET", "https://admin.p2p/api/health", "", nil)
	if code != 200 || !strings.Contains(body, `"status"`) {
		t.Fatalf("https://admin.p2p/api/health: %d %s", code, body)
	}
	installNotes(t, b)
	testutil.Eventually(t, 15*time.Second, func() error {
		code, body, _ := get(t, secure, "GET", "https://notes.p2p/", "", nil)
		if code != 200 || !strings.Contains(body, "<h1>notes</h1>") {
			return fmt.Errorf("notes www: %d %s", code, body)
		}
		code, body, _ = get(t, secure, "GET", "https://notes.p2p/api/hello", "", nil)
		if code != 200 || !strings.Contains(body, `"domain":"notes.p2p"`) {
			return fmt.Errorf("notes handler: %d %s", code, body)
		}
		return nil
	})
	if code, body, _ := get(t, secure, "POST", "https://notes.p2p/api/notes", `{"text":"x"}`, nil); code != 401 || !strings.Contains(body, "Authentication required") {
		t.Fatalf("write without token: %d %s", code, body)
	}
	var tok struct{ Token, PeerID string }
	code, body, _ = get(t, secure, "GET", "https://profile.p2p/api/token", "", nil)
	if code != 200 || json.Unmarshal([]byte(body), &tok) != nil || tok.PeerID != b.ID() {
		t.Fatalf("token: %d %s", code, body)
	}
	code, body, _ = get(t, secure, "POST", "https://notes.p2p/api/notes", `{"text":"through the edge"}`, map[string]string{"Authorization": "Bearer " + tok.Token})
	if code != 201 || !strings.Contains(body, `"by":"`+b.ID()+`"`) {
		t.Fatalf("write with token: %d %s", code, body)
	}
	if code, body, _ := get(t, plain, "GET", "http://notes.p2p/api/notes", "", nil); code != 200 || !strings.Contains(body, "through the edge") {
		t.Fatalf("notes list: %d %s", code, body)
	}

	// 404 for a host nobody serves, 400 without a Host.
	if code, body, _ := get(t, plain, "GET", "http://nobody.p2p/", "", nil); code != 404 || !strings.Contains(body, "nobody.p2p") {
		t.Fatalf("unknown host: %d %s", code, body)
	}
	raw, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(raw, "GET / HTTP/1.0\r\n\r\n")
	first, _ := io.ReadAll(io.LimitReader(raw, 64))
	raw.Close()
	if !strings.Contains(string(first), " 400 ") {
		t.Fatalf("no Host: %q", first)
	}
	// Oversized headers: 431, counted under route "none".
	refused := routeCount(b.edge.Load(), proxy.RouteNone, 431)
	if code, _, _ := get(t, plain, "GET", "http://site.p2p/", "", map[string]string{"X-Big": strings.Repeat("a", 20<<10)}); code != 431 {
		t.Fatalf("oversized headers: %d", code)
	}
	if n := routeCount(b.edge.Load(), proxy.RouteNone, 431); n != refused+1 {
		t.Fatalf("431s counted under route none: %d, was %d", n, refused)
	}

	// Every request has its access line on B's httpProxy channel (written
	// in batches off the request path): a proxied one with its upstream,
	// the 404 above with none. (Made last, so the polls above cannot push
	// them out of the tail read here.)
	if code, _, _ := get(t, plain, "GET", "http://site.p2p/logged", "", nil); code != 200 {
		t.Fatalf("site.p2p/logged: %d", code)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		var tail struct{ Lines []string }
		mustJSON(t, "GET", "http://"+b.AdminAddr()+"/api/logs/httpProxy?lines=50", "", 200, &tail)
		all := strings.Join(tail.Lines, "\n")
		for _, want := range []string{"method=GET host=site.p2p path=/logged status=200 bytes=", "upstream=" + url,
			"host=nobody.p2p path=/ status=404"} {
			if !strings.Contains(all, want) {
				return fmt.Errorf("no %q in the access log:\n%s", want, all)
			}
		}
		return nil
	})

	// 502: the tunnel server is gone.
	mustJSON(t, "POST", "http://"+a.AdminAddr()+"/api/tunnel-delete", `{"id":"`+sid+`"}`, 200, nil)
	testutil.Eventually(t, 20*time.Second, func() error {
		code, body, _ := get(t, plain, "GET", "http://site.p2p/gone", "", nil)
		if code != 502 || !strings.Contains(body, "Bad Gateway") {
			return fmt.Errorf("after the server went away: %d %s", code, body)
		}
		return nil
	})
}

// The certificate endpoints: list, details, generate (a new serial),
// delete, install into a trust folder, and a new root that re-signs.
func TestCertEndpoints(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	addDomain(t, base, "cert.p2p", hashA)
	if code, body := call(t, "POST", base+"/api/generate-cert", `{"domain":"cert.p2p"}`); code != 200 || body != "OK" {
		t.Fatalf("generate-cert: %d %s", code, body)
	}
	var names []string
	mustJSON(t, "GET", base+"/api/certs", "", 200, &names)
	if len(names) != 1 || names[0] != "cert.p2p" {
		t.Fatalf("certs: %v", names)
	}
	parse := func() *x509.Certificate {
		code, body := call(t, "GET", base+"/api/cert-details?domain=cert.p2p", "")
		block, _ := pem.Decode([]byte(body))
		if code != 200 || block == nil {
			t.Fatalf("cert-details: %d %s", code, body)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := parse()
	if len(first.IPAddresses) != 1 || !strings.HasPrefix(first.IPAddresses[0].String(), "127.77.") {
		t.Fatalf("the domain's local IP is not in the certificate: %v", first.IPAddresses)
	}
	mustJSON(t, "POST", base+"/api/regenerate-cert", `{"domain":"cert.p2p"}`, 200, nil)
	if parse().SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("regenerate-cert kept the serial")
	}
	oldRoot, _ := os.ReadFile(n.CA().RootPath())
	mustJSON(t, "POST", base+"/api/regenerate-ca", "", 200, nil)
	newRoot, _ := os.ReadFile(n.CA().RootPath())
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(newRoot)
	if string(oldRoot) == string(newRoot) {
		t.Fatal("regenerate-ca kept the root")
	}
	if _, err := parse().Verify(x509.VerifyOptions{Roots: pool, DNSName: "cert.p2p"}); err != nil {
		t.Fatalf("leaf after regenerate-ca: %v", err)
	}
	trust := t.TempDir()
	t.Setenv("PEERDNS_CA_TRUST_DIR", trust)
	t.Setenv("HOME", t.TempDir()) // install-ca also fills NSS stores under HOME: none of the machine's
	mustJSON(t, "POST", base+"/api/install-ca", "", 200, nil)
	if got, _ := os.ReadFile(filepath.Join(trust, "peerdns-root.crt")); string(got) != string(newRoot) {
		t.Fatal("install-ca did not put the root in the trust folder")
	}
	for path, body := range map[string]string{"/api/generate-cert": `{"domain":"../etc"}`, "/api/delete-cert": `{"domain":"none.p2p"}`} {
		if code, _ := call(t, "POST", base+path, body); code != 500 {
			t.Fatalf("%s %s: %d", path, body, code)
		}
	}
	if code, _ := call(t, "GET", base+"/api/cert-details?domain=none.p2p", ""); code != 500 {
		t.Fatal("details of an unknown domain")
	}
	mustJSON(t, "POST", base+"/api/delete-cert", `{"domain":"cert.p2p"}`, 200, nil)
	mustJSON(t, "GET", base+"/api/certs", "", 200, &names)
	if len(names) != 0 {
		t.Fatalf("after delete: %v", names)
	}
}

// A claim with ssl: true is spoken to over HTTPS inside the tunnel, and
// an upstream that never answers is a 504.
func TestEdgeUpstreamTLSAndTimeout(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.edgeUpstreamTimeout = time.Second
	n := startConfig(t, cfg)
	base := "http://" + n.AdminAddr()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	tlsBack := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/trickle" {
			// 25 parts 100 ms apart: the whole body takes 2.5 times
			// the upstream timeout, and no gap between two reads comes
			// near it (900 ms to spare for a slow race-detector run).
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for i := range 25 {
				fmt.Fprintf(w, "part %d;", i)
				w.(http.Flusher).Flush()
				select {
				case <-tick.C:
				case <-r.Context().Done():
					return
				}
			}
			return
		}
		if r.URL.Path == "/count" {
			n, err := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "%d %v", n, err)
			return
		}
		if r.URL.Path == "/slow" {
			select {
			case <-stop:
			case <-r.Context().Done():
			}
			return
		}
		fmt.Fprintf(w, "tls backend %s host=%s", r.URL.Path, r.Host)
	}))
	t.Cleanup(tlsBack.Close)
	port := tlsBack.Listener.Addr().(*net.TCPAddr).Port
	_, url := tunnelServerURL(t, n, fmt.Sprintf(`{"name":"tlsback","port":%d}`, port))
	mustJSON(t, "POST", base+"/api/add-domain", `{"domain":"secure.p2p","hash":"`+url+`","ssl":true}`, 200, nil)
	httpAddr, _ := n.EdgeAddrs()
	c := edgeClient(httpAddr, nil)
	testutil.Eventually(t, 10*time.Second, func() error {
		code, body, _ := get(t, c, "GET", "http://secure.p2p/hi", "", nil)
		if code != 200 || body != "tls backend /hi host=secure.p2p" {
			return fmt.Errorf("ssl upstream: %d %s", code, body)
		}
		return nil
	})
	if code, body, _ := get(t, c, "GET", "http://secure.p2p/slow", "", nil); code != 504 || !strings.Contains(body, "Gateway Timeout") {
		t.Fatalf("slow upstream: %d %s", code, body)
	}
	// A body that keeps flowing is not cut by the upstream timeout.
	if code, body, _ := get(t, c, "GET", "http://secure.p2p/trickle", "", nil); code != 200 || !strings.HasSuffix(body, "part 24;") {
		t.Fatalf("a body longer than the upstream timeout: %d %q", code, body)
	}
	// Uploads stream to the TLS upstream (a connection of their own, TLS
	// spoken by the edge), and one that takes longer than the upstream
	// timeout to send (25 pieces of 64 KiB, 100 ms apart) is not cut
	// while it keeps coming.
	for _, up := range []struct {
		name string
		body io.Reader
		n    int
	}{
		{"5 MiB", io.LimitReader(zeros{}, 5<<20), 5 << 20},
		{"2.5 s of upload", &trickle{left: 25, piece: 64 << 10, every: 100 * time.Millisecond}, 25 * 64 << 10},
	} {
		resp, err := c.Post("http://secure.p2p/count", "application/octet-stream", up.body)
		if err != nil {
			t.Fatalf("%s: %v", up.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("%d <nil>", up.n); resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("%s to the TLS upstream: %d %q, want 200 %q", up.name, resp.StatusCode, b, want)
		}
	}
}

// trickle is a request body of left pieces, one every every.
type trickle struct {
	left, piece int
	every       time.Duration
	cur         []byte
}

func (tr *trickle) Read(b []byte) (int, error) {
	if len(tr.cur) == 0 {
		if tr.left == 0 {
			return 0, io.EOF
		}
		time.Sleep(tr.every) // the pace of the body itself, not a wait for an event
		tr.left--
		tr.cur = make([]byte, tr.piece)
	}
	n := copy(b, tr.cur)
	tr.cur = tr.cur[n:]
	return n, nil
}

// Clients and upstreams that misbehave, at the edge: a slowloris client
// gets 408 and is cut off after the read timeout; a client that never
// reads its (large) response stalls nobody else and is cut off after the
// write timeout; an upstream that answers garbage is a 502, and the
// proxy goes on serving.
func TestEdgeMisbehavingPeers(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.edgeReadTimeout = 300 * time.Millisecond
	cfg.edgeWriteTimeout = 500 * time.Millisecond
	n := startConfig(t, cfg)
	base := "http://" + n.AdminAddr()

	big := strings.Repeat("x", 32<<20) // more than the socket buffers hold
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			_, _ = io.WriteString(w, big)
			return
		case "/paced":
			_, _ = io.WriteString(w, big[:16<<20])
			return
		}
		fmt.Fprint(w, "hi")
	}))
	t.Cleanup(back.Close)
	_, url := tunnelServerURL(t, n, fmt.Sprintf(`{"name":"back","port":%d}`, back.Listener.Addr().(*net.TCPAddr).Port))
	mustJSON(t, "POST", base+"/api/add-domain", `{"domain":"site.p2p","hash":"`+url+`"}`, 200, nil)

	// A backend that answers every request with bytes that are not HTTP.
	gport := serveTCP(t, func(c net.Conn) {
		buf := make([]byte, 4096)
		if _, err := c.Read(buf); err == nil {
			_, _ = c.Write([]byte("\x00\xff garbage \r\n\x13\x37\r\n\r\n"))
		}
	})
	_, gurl := tunnelServerURL(t, n, fmt.Sprintf(`{"name":"garbage","port":%d}`, gport))
	mustJSON(t, "POST", base+"/api/add-domain", `{"domain":"junk.p2p","hash":"`+gurl+`"}`, 200, nil)

	httpAddr, _ := n.EdgeAddrs()
	c := edgeClient(httpAddr, nil)
	testutil.Eventually(t, 10*time.Second, func() error {
		if code, body, _ := get(t, c, "GET", "http://site.p2p/hi", "", nil); code != 200 || body != "hi" {
			return fmt.Errorf("site.p2p: %d %s", code, body)
		}
		return nil
	})

	// Slowloris: half a request head, then nothing.
	slow := sendRaw(t, httpAddr, "GET /hi HTTP/1.1\r\nHost: site.p2p\r\nX-Slow: ")
	_ = slow.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(slow)
	if err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 408 ") {
		t.Fatalf("slowloris: %q %v (want a 408 and the connection closed)", got, err)
	}

	// A client that asks for 32 MiB and never reads them.
	sendRaw(t, httpAddr, "GET /big HTTP/1.1\r\nHost: site.p2p\r\n\r\n")
	testutil.Eventually(t, 10*time.Second, func() error {
		if code, body, _ := get(t, c, "GET", "http://site.p2p/hi", "", nil); code != 200 || body != "hi" {
			return fmt.Errorf("beside a stuck client: %d %s", code, body)
		}
		// The stuck client's connection goes once the write timeout
		// passes (the other client's keep-alive connection stays): 32
		// MiB is more than the two sockets' buffers hold.
		if open := n.edge.Load().OpenConns(); open > 1 {
			return fmt.Errorf("%d client connections open, want the stuck one gone", open)
		}
		return nil
	})

	// A client that reads slowly but steadily (16 MiB at 5 MiB/s, a
	// read every 50 ms) gets the whole response: the write timeout is
	// between two writes, not over the whole response.
	paced := sendRaw(t, httpAddr, "GET /paced HTTP/1.1\r\nHost: site.p2p\r\n\r\n")
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	_ = paced.SetReadDeadline(time.Now().Add(30 * time.Second))
	pr, err := http.ReadResponse(bufio.NewReader(&pacedReader{r: paced, tick: tick.C}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, pr.Body); err != nil || n != 16<<20 {
		t.Fatalf("a slow, steady reader got %d bytes: %v", n, err)
	}

	// Garbage from the upstream: 502, and the proxy still serves.
	if code, body, _ := get(t, c, "GET", "http://junk.p2p/", "", nil); code != 502 || !strings.Contains(body, "Bad Gateway") {
		t.Fatalf("garbage upstream: %d %s", code, body)
	}
	if code, body, _ := get(t, c, "GET", "http://site.p2p/hi", "", nil); code != 200 || body != "hi" {
		t.Fatalf("after the garbage upstream: %d %s", code, body)
	}

	// The proxy's counters reach /api/stats (a read takes a fresh sample): the
	// 200s above as successful, the 502 as failed.
	testutil.Eventually(t, 10*time.Second, func() error {
		var st struct {
			Requests struct {
				Proxy struct{ Total, Successful, Failed int64 }
			}
		}
		mustJSON(t, "GET", base+"/api/stats", "", 200, &st)
		if p := st.Requests.Proxy; p.Failed < 1 || p.Successful < 4 || p.Total != p.Successful+p.Failed {
			return fmt.Errorf("proxy requests in /api/stats: %+v", p)
		}
		return nil
	})
}

// A response body is streamed to the client as it comes: the client has
// the first part while the upstream is still holding back the rest (a
// proxy that buffered whole bodies would send nothing until the end, and
// would hold a download of any size in memory).
func TestEdgeStreamsBodies(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	first := strings.Repeat("a", 1<<20)
	release := make(chan struct{})
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(2*len(first)))
		_, _ = io.WriteString(w, first)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, strings.ToUpper(first))
	}))
	t.Cleanup(back.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	_, url := tunnelServerURL(t, n, fmt.Sprintf(`{"name":"back","port":%d}`, back.Listener.Addr().(*net.TCPAddr).Port))
	mustJSON(t, "POST", base+"/api/add-domain", `{"domain":"dl.p2p","hash":"`+url+`"}`, 200, nil)
	httpAddr, _ := n.EdgeAddrs()

	var resp *http.Response
	testutil.Eventually(t, 10*time.Second, func() error {
		r, err := edgeClient(httpAddr, nil).Get("http://dl.p2p/file")
		if err != nil {
			return err
		}
		if r.StatusCode != 200 {
			r.Body.Close()
			return fmt.Errorf("status %d", r.StatusCode)
		}
		resp = r
		return nil
	})
	defer resp.Body.Close()
	got := make([]byte, len(first))
	if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != first {
		t.Fatalf("the first half did not come while the upstream held the rest: %v", err)
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != strings.ToUpper(first) {
		t.Fatalf("the second half: %d bytes, %v", len(rest), err)
	}
}

// pacedReader reads at most 256 KiB per tick: a client that reads slowly
// but steadily.
type pacedReader struct {
	r      io.Reader
	tick   <-chan time.Time
	budget int
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if p.budget == 0 {
		<-p.tick
		p.budget = 256 << 10
	}
	n, err := p.r.Read(b[:min(len(b), p.budget)])
	p.budget -= n
	return n, err
}

// sendRaw opens a TCP connection to addr, writes raw on it and returns
// it (closed when the test ends).
func sendRaw(t *testing.T, addr, raw string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	return c
}
