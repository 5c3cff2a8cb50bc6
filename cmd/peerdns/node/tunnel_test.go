package node

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// serveTCP accepts TCP connections on 127.0.0.1 until the test ends and
// hands each to handle in its own goroutine; it returns the port.
func serveTCP(t *testing.T, handle func(net.Conn)) int {
	return testutil.ServeTCP(t, handle).Port
}

// echoServer echoes every byte until the client half-closes, then
// closes its side.
func echoServer(t *testing.T) int {
	return serveTCP(t, testutil.Echo)
}

// freePort is a TCP port free on 127.0.0.1 right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// tunnelServerURL creates a tunnel server on n for port and returns its
// id and hs:// URL once it runs.
func tunnelServerURL(t *testing.T, n *Node, body string) (string, string) {
	t.Helper()
	base := "http://" + n.AdminAddr()
	var created struct{ ID string }
	mustJSON(t, "POST", base+"/api/tunnel-create", body, 200, &created)
	var url string
	testutil.Eventually(t, 10*time.Second, func() error {
		var ss []messages.TunnelServer
		mustJSON(t, "GET", base+"/api/tunnel-servers", "", 200, &ss)
		for _, s := range ss {
			if s.ID == created.ID && s.Info.State == messages.TunnelRunning && s.Info.URL != "" {
				url = s.Info.URL
				return nil
			}
		}
		return fmt.Errorf("server %s not running: %+v", created.ID, ss)
	})
	return created.ID, url
}

// claimOn claims domain with url on n and waits until n sees it resolved
// to itself (a client may only be made for a domain the node owns).
func claimOn(t *testing.T, n *Node, domain, url string) {
	t.Helper()
	testutil.AddDomain(t, "http://"+n.AdminAddr(), domain, url)
	testutil.Eventually(t, 20*time.Second, func() error {
		cs := consensusOn(t, n, domain)
		if cs.Status != "resolved" || cs.ResolvedClaimant == nil || *cs.ResolvedClaimant != n.ID() {
			return fmt.Errorf("%s on %s: %+v", domain, n.ID()[:8], cs)
		}
		return nil
	})
}

// runningClient waits for client id on n to run and returns its address.
func runningClient(t *testing.T, n *Node, id string) string {
	t.Helper()
	var addr string
	testutil.Eventually(t, 30*time.Second, func() error {
		var cs []messages.TunnelClient
		mustJSON(t, "GET", "http://"+n.AdminAddr()+"/api/tunnel-clients", "", 200, &cs)
		for _, c := range cs {
			if c.ID == id && c.Info.State == messages.TunnelRunning {
				addr = c.Info.Address
				return nil
			}
		}
		return fmt.Errorf("client %s not running: %+v", id, cs)
	})
	return addr
}

// echoThrough sends n bytes through addr and checks they come back
// unchanged (by SHA-256), half-closing after the last byte.
func echoThrough(addr string, n int64) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	sent := sha256.New()
	errc := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.MultiWriter(c, sent), io.LimitReader(rand.Reader, n))
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite() // the half-close must reach the echo server
		}
		errc <- err
	}()
	got := sha256.New()
	m, err := io.Copy(got, c)
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	if err := <-errc; err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if m != n || string(got.Sum(nil)) != string(sent.Sum(nil)) {
		return fmt.Errorf("echoed %d of %d bytes, hashes differ: %v", m, n, string(got.Sum(nil)) != string(sent.Sum(nil)))
	}
	return nil
}

// A tunnel server on A and a client on B: HTTP and a 100 MB echo (with
// half-close) go through, a node restart of the server side keeps the
// server and the client reconnects, and a client that only knows the
// announced id of a secure server is refused.
func TestTunnelTwoNodes(t *testing.T) {
	nodes := newNetwork(t, 2)
	a, b := nodes[0], nodes[1]
	baseB := "http://" + b.AdminAddr()

	// HTTP through the tunnel.
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	})}
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(hln) }()
	t.Cleanup(func() { hs.Close() })
	_, webURL := tunnelServerURL(t, a, fmt.Sprintf(`{"name":"web","port":%d}`, hln.Addr().(*net.TCPAddr).Port))
	claimOn(t, b, "web.p2p", webURL)
	var cl struct{ ID string }
	mustJSON(t, "POST", baseB+"/api/tunnel-client-create", fmt.Sprintf(`{"domain":"web.p2p","key":%q,"port":%d}`, webURL, freePort(t)), 200, &cl)
	webAddr := runningClient(t, b, cl.ID)
	testutil.Eventually(t, 20*time.Second, func() error {
		resp, err := testutil.Client.Get("http://" + webAddr + "/through")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "hello /through" {
			return fmt.Errorf("through the tunnel: %d %q", resp.StatusCode, body)
		}
		return nil
	})

	// 100 MB echo with half-close.
	_, echoURL := tunnelServerURL(t, a, fmt.Sprintf(`{"port":%d,"host":"127.0.0.1"}`, echoServer(t)))
	claimOn(t, b, "echo.p2p", echoURL)
	mustJSON(t, "POST", baseB+"/api/tunnel-client-create", fmt.Sprintf(`{"domain":"echo.p2p","key":%q,"port":%d,"serviceName":"echo"}`, echoURL, freePort(t)), 200, &cl)
	if cl.ID != "echo.p2p_echo" {
		t.Fatalf("client id with a service name = %q", cl.ID)
	}
	echoAddr := runningClient(t, b, cl.ID)
	testutil.Eventually(t, 20*time.Second, func() error { return echoThrough(echoAddr, 1<<10) })
	if err := echoThrough(echoAddr, 100<<20); err != nil {
		t.Fatalf("100 MB echo: %v", err)
	}

	// Bad input: nothing is created.
	for _, tt := range []struct{ path, body string }{
		{"/api/tunnel-create", `{"port":70000}`},
		{"/api/tunnel-create", `{"port":80,"host":"not a host!"}`},
		{"/api/tunnel-client-create", `{"domain":"echo.p2p","key":"hs://zz","port":9}`},
		{"/api/tunnel-client-create", `{"domain":"echo.p2p","port":9}`},
		{"/api/tunnel-delete", `{"id":"no-such-tunnel"}`},
	} {
		if code, body := call(t, "POST", baseB+tt.path, tt.body); code == 200 {
			t.Errorf("%s %s = 200 %s", tt.path, tt.body, body)
		}
	}
	if code, body := call(t, "POST", baseB+"/api/tunnel-client-create", fmt.Sprintf(`{"domain":"nobody.p2p","key":%q,"port":%d}`, echoURL, freePort(t))); code != 400 {
		t.Errorf("client for a domain B does not own = %d %s", code, body)
	}

	// The server side restarts: its tunnel server comes back with the same
	// URL and B's client carries traffic again.
	cfgA := a.cfg
	cfgA.P2PAddr = a.endpoint.Addr().String() // where B knows A
	a.Stop()
	a2, err := Start(cfgA, io.Discard)
	if err != nil {
		t.Fatalf("restart A: %v", err)
	}
	t.Cleanup(a2.Stop)
	testutil.Eventually(t, 20*time.Second, func() error {
		var ss []messages.TunnelServer
		mustJSON(t, "GET", "http://"+a2.AdminAddr()+"/api/tunnel-servers", "", 200, &ss)
		urls := map[string]bool{}
		for _, s := range ss {
			urls[s.Info.URL] = true
		}
		if len(ss) != 2 || !urls[echoURL] || !urls[webURL] {
			return fmt.Errorf("servers after restart = %+v, want %s and %s", ss, echoURL, webURL)
		}
		return nil
	})
	testutil.Eventually(t, 60*time.Second, func() error { return echoThrough(echoAddr, 64<<10) })
}

// Many connections at once through one tunnel.
func TestTunnelConcurrentConnections(t *testing.T) {
	nodes := newNetwork(t, 2)
	a, b := nodes[0], nodes[1]
	baseB := "http://" + b.AdminAddr()
	_, url := tunnelServerURL(t, a, fmt.Sprintf(`{"port":%d}`, echoServer(t)))
	claimOn(t, b, "many.p2p", url)
	var cl struct{ ID string }
	mustJSON(t, "POST", baseB+"/api/tunnel-client-create", fmt.Sprintf(`{"domain":"many.p2p","key":%q,"port":%d}`, url, freePort(t)), 200, &cl)
	addr := runningClient(t, b, cl.ID)
	testutil.Eventually(t, 20*time.Second, func() error { return echoThrough(addr, 16) })

	const n = 1000
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// All n open at the same time, then each says hello and reads it back.
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	errs := make(chan error, n)
	for i, c := range conns {
		go func(i int, c net.Conn) {
			_ = c.SetDeadline(time.Now().Add(60 * time.Second))
			msg := fmt.Sprintf("hello %d\n", i)
			if _, err := io.WriteString(c, msg); err != nil {
				errs <- err
				return
			}
			line, err := bufio.NewReader(c).ReadString('\n')
			if err == nil && line != msg {
				err = fmt.Errorf("connection %d got %q", i, line)
			}
			errs <- err
		}(i, c)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var cs []messages.TunnelClient
	mustJSON(t, "GET", baseB+"/api/tunnel-clients", "", 200, &cs)
	if len(cs) != 1 || cs[0].Info.ConnectionsTotal < n {
		t.Fatalf("client counters after %d connections: %+v", n, cs)
	}
	if !strings.HasPrefix(url, "hs://") {
		t.Fatalf("url %q", url)
	}
}
