package tunnel

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
)

// Two nodes over the in-memory transport: an HTTP service on node A is
// reached through a client on node B.
func TestHTTPThroughTunnel(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	sid, url := a.createServer(targetOpts(ln.Addr().String()))
	if !strings.HasPrefix(url, "hs://") || len(url) != 69 {
		t.Fatalf("url = %q", url)
	}
	if got := a.mesh.Announced(); len(got) != 1 || got[0] != url[5:] {
		t.Fatalf("announced %v, want the public key %s", got, url[5:])
	}
	b.own("site.p2p")
	cid, addr := b.createClient("site.p2p", url)

	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < 5; i++ {
		resp, err := hc.Post("http://"+addr+"/hello", "text/plain", strings.NewReader(fmt.Sprint("body", i)))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("POST /hello body%d", i); string(got) != want {
			t.Fatalf("response %q, want %q", got, want)
		}
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		s, c := a.server(sid).Info, b.client(cid).Info
		if s.ConnectionsTotal != 5 || c.ConnectionsTotal != 5 || s.ConnectionsOpen != 0 || c.ConnectionsOpen != 0 {
			return fmt.Errorf("server %+v client %+v", s.TunnelCounters, c.TunnelCounters)
		}
		if s.BytesIn == 0 || s.BytesOut == 0 || c.BytesIn != s.BytesOut || c.BytesOut != s.BytesIn {
			return fmt.Errorf("bytes: server %+v client %+v", s.TunnelCounters, c.TunnelCounters)
		}
		return nil
	})
}

// 100 MB through the tunnel and back, checked by SHA-256.
func TestEcho100MB(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	_, url := a.createServer(targetOpts(echoServer(t)))
	b.own("echo.p2p")
	_, addr := b.createClient("echo.p2p", url)
	echoHash(t, addr, 100<<20, false)
}

// echoHash sends size random bytes through the echo at addr while
// reading them back and compares hashes. With halfClose the sender ends
// with a FIN and the reader reads to the echo's FIN; without, it reads
// size bytes (the in-memory transport cannot carry a half-close).
func echoHash(t *testing.T, addr string, size int64, halfClose bool) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sent, got := sha256.New(), sha256.New()
	errc := make(chan error, 1)
	go func() {
		_, err := io.Copy(c, io.TeeReader(io.LimitReader(rand.Reader, size), sent))
		if err == nil && halfClose {
			err = c.(*net.TCPConn).CloseWrite()
		}
		errc <- err
	}()
	var src io.Reader = c // until the echo half-closes
	if !halfClose {
		src = io.LimitReader(c, size)
	}
	n, err := io.Copy(got, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if n != size || !bytes.Equal(sent.Sum(nil), got.Sum(nil)) {
		t.Fatalf("echoed %d bytes, hash match %v; want %d and equal", n, bytes.Equal(sent.Sum(nil), got.Sum(nil)), size)
	}
}

// Half-close over QUIC: the client's FIN reaches the service, which then
// still sends its reply, and the reply's FIN reaches the client.
func TestHalfCloseQUIC(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, true)
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	target := tcpServer(t, func(c net.Conn) {
		req, err := io.ReadAll(c) // only returns on the client's FIN
		if err != nil {
			return
		}
		fmt.Fprintf(c, "got %d bytes: %s", len(req), req)
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c)
	})
	c := dialThrough(t, a, b, "half.p2p", target)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("question")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	reply, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(reply) != "got 8 bytes: question" {
		t.Fatalf("reply %q", reply)
	}
	// And the bulk path over real QUIC.
	echo := a.ask(targetOpts(echoServer(t)))
	b.own("echo.p2p")
	_, eaddr := b.createClient("echo.p2p", echo)
	echoHash(t, eaddr, 8<<20, true)
}

// ask creates a server and returns its url.
func (n *testNode) ask(o messages.TunnelServerOpts) string {
	_, url := n.createServer(o)
	return url
}

// whileProgressing polls cond until it holds, and fails t once the count
// cond reports has not changed for stall: a bound on a stall, not on the
// whole, so a loaded machine that moves 1,000 connections slowly is not
// failed, one that stops moving them is.
func whileProgressing(t *testing.T, stall time.Duration, cond func() (int64, error)) {
	t.Helper()
	last, lastAt := int64(-1), time.Now()
	testutil.Eventually(t, time.Hour, func() error {
		n, err := cond()
		if err == nil {
			return nil
		}
		if n != last {
			last, lastAt = n, time.Now()
		} else if time.Since(lastAt) > stall {
			t.Fatalf("no progress for %v: %v", stall, err)
		}
		return err
	})
}

// 1,000 connections open at once through one tunnel.
func TestThousandConcurrentConnections(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	sid, url := a.createServer(targetOpts(echoServer(t)))
	b.own("many.p2p")
	cid, addr := b.createClient("many.p2p", url)

	const n = 1000
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns[i] = c
		defer c.Close()
	}
	// Every connection is open at the same time before any is used.
	whileProgressing(t, 20*time.Second, func() (int64, error) {
		if o := a.server(sid).Info.ConnectionsOpen; o != n {
			return o, fmt.Errorf("server has %d open, want %d", o, n)
		}
		return n, nil
	})
	// Each connection echoes; the connections' deadlines are put in the
	// past only when no echo has completed for 20 s.
	var wg sync.WaitGroup
	var echoed atomic.Int64
	errs := make(chan error, n)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := []byte(fmt.Sprintf("connection %d says hello", i))
			if _, err := c.Write(msg); err != nil {
				errs <- err
				return
			}
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
				errs <- fmt.Errorf("conn %d: %q %v", i, got, err)
				return
			}
			echoed.Add(1)
		}()
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	watchdog := time.NewTicker(100 * time.Millisecond)
	defer watchdog.Stop()
	for last, lastAt := int64(-1), time.Now(); ; {
		select {
		case <-all:
		case <-watchdog.C:
			if e := echoed.Load(); e != last {
				last, lastAt = e, time.Now()
				continue
			}
			if time.Since(lastAt) <= 20*time.Second {
				continue
			}
			t.Errorf("no echo for 20 s, %d of %d echoed", last, n)
			for _, c := range conns {
				_ = c.SetDeadline(time.Now())
			}
			<-all
		}
		break
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, c := range conns {
		c.Close()
	}
	whileProgressing(t, 10*time.Second, func() (int64, error) {
		s, c := a.server(sid).Info, b.client(cid).Info
		if s.ConnectionsOpen != 0 || c.ConnectionsOpen != 0 || c.ConnectionsTotal != n {
			return s.ConnectionsOpen + c.ConnectionsOpen, fmt.Errorf("server %+v client %+v", s.TunnelCounters, c.TunnelCounters)
		}
		return 0, nil
	})
}

// A server restarted under live clients: the connections it carried are
// closed, new ones work; a deleted server makes the client wait
// (starting) and a server made again from the same seed serves it.
func TestServerRestartUnderLiveClients(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	opts := targetOpts(echoServer(t))
	opts.Key = "restart seed"
	sid, url := a.createServer(opts)
	b.own("live.p2p")
	cid, addr := b.createClient("live.p2p", url)

	live := make([]net.Conn, 10)
	for i := range live {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		live[i] = c
	}
	if r := ask[*messages.TunnelWriteReply](t, a, &messages.RestartTunnelServer{ID: sid}); r.Err != nil {
		t.Fatal(r.Err)
	}
	for i, c := range live {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("live connection %d survived the restart", i)
		}
	}
	if got := a.server(sid).Info.URL; got != url {
		t.Fatalf("url after restart %q, want %q", got, url)
	}
	testutil.Eventually(t, 5*time.Second, func() error { return dialEcho(addr, []byte("after restart")) })

	// Deleted: the client keeps its port and waits.
	if r := ask[*messages.TunnelWriteReply](t, a, &messages.DeleteTunnelServer{ID: sid}); r.Err != nil {
		t.Fatal(r.Err)
	}
	b.waitClient(cid, messages.TunnelStarting)
	if err := dialEcho(addr, []byte("nobody")); err == nil {
		t.Fatal("a connection worked with no server")
	}
	// Back with the same seed: same key, and the client carries again.
	_, url2 := a.createServer(opts)
	if url2 != url {
		t.Fatalf("same seed gave %q, want %q", url2, url)
	}
	b.waitClient(cid, messages.TunnelRunning)
	testutil.Eventually(t, 5*time.Second, func() error { return dialEcho(addr, []byte("back again")) })
}

// A secure server: the client that has the URL proves the secret and
// gets through; a peer that knows only the announced id is refused with
// no proof and with a wrong one, and each refusal is logged and counted.
func TestSecureTunnel(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	opts := targetOpts(echoServer(t))
	opts.Secure = true
	sid, url := a.createServer(opts)
	announced := a.mesh.Announced()
	if len(announced) != 1 || announced[0] == url[5:] || strings.Contains(a.log.String(), url[5:]) {
		t.Fatalf("the secret leaks: announced %v for %s", announced, url)
	}
	b.own("secret.p2p")
	_, addr := b.createClient("secret.p2p", url)
	if err := dialEcho(addr, []byte("with the secret")); err != nil {
		t.Fatal(err)
	}

	conn, ok := b.mesh.Conn(a.id.ID())
	if !ok {
		t.Fatal("no connection b→a")
	}
	for _, tt := range []struct {
		name  string
		proof []byte
	}{
		{"no proof", nil},
		{"wrong proof", bytes.Repeat([]byte{7}, 32)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := a.refused()
			_, err := openWithProof(t, conn, announced[0], tt.proof)
			if err == nil || !strings.Contains(err.Error(), "proof refused") {
				t.Fatalf("open = %v, want proof refused", err)
			}
			if a.refused() != before+1 {
				t.Fatalf("refused %d, want %d", a.refused(), before+1)
			}
		})
	}
	// A proof made with another secret on this very connection fails too.
	other := make([]byte, 32)
	if _, err := openTunnel(t.Context(), conn, announced[0], other, 0, time.Second, 5*time.Second); err == nil {
		t.Fatal("a proof with the wrong secret was accepted")
	}
	if !strings.Contains(a.log.String(), "missing or wrong proof") {
		t.Fatalf("refusal not logged: %s", a.log.String())
	}
	if e := a.server(sid).Info.LastError; !strings.Contains(e, "proof") {
		t.Fatalf("lastError %q", e)
	}
	// A secure key given as a plain key is not a public key of anyone.
	if _, err := openTunnel(t.Context(), conn, url[5:], nil, 0, time.Second, 5*time.Second); err == nil || !strings.Contains(err.Error(), "unknown tunnel") {
		t.Fatalf("open with the secret as id = %v, want unknown tunnel", err)
	}
}

// On the node of a secure server too, its secret is what reaches it:
// the announced id, which every peer sees, reaches nothing, through a
// client or the Dialer (the edge proxy dials whatever hash a domain's
// claim names, and anyone may claim a domain with it).
func TestSecureLocalServerNeedsSecret(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	dl := &Dialer{}
	n := tn.node(func(d *Deps) { d.Dialer = dl })
	opts := targetOpts(echoServer(t))
	opts.Secure = true
	_, url := n.createServer(opts)
	public := urlScheme + n.mesh.Announced()[0]

	c, err := dl.Dial(t.Context(), url)
	if err != nil {
		t.Fatalf("dial with the secret: %v", err)
	}
	err = dialEchoConn(c, []byte("secret"))
	c.Close()
	if err != nil {
		t.Fatalf("echo with the secret: %v", err)
	}
	if c, err := dl.Dial(t.Context(), public); err == nil {
		c.Close()
		t.Fatal("the Dialer reached a secure server by its announced id")
	}

	n.own("public.p2p")
	r := ask[*messages.CreateTunnelClientReply](t, n, &messages.CreateTunnelClient{Opts: messages.TunnelClientOpts{
		Domain: "public.p2p", Key: public, Port: freePort(t),
	}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	var addr string
	testutil.Eventually(t, 5*time.Second, func() error {
		if addr = n.client(r.ID).Info.Address; addr == "" {
			return errors.New("client not bound")
		}
		return nil
	})
	if err := dialEcho(addr, []byte("public")); err == nil {
		t.Fatal("a client reached a secure server by its announced id")
	}
	if st := n.client(r.ID).Info.State; st == messages.TunnelRunning {
		t.Fatalf("client of the announced id is %s", st)
	}

	// A UDP flow neither: it is refused (and says so) with no answer.
	uo := targetOpts(udpEcho(t))
	uo.Secure, uo.UDP = true, true
	n.createServer(uo)
	var upublic string
	for _, id := range n.mesh.Announced() {
		if urlScheme+id != public {
			upublic = urlScheme + id
		}
	}
	uid := ask[*messages.CreateTunnelClientReply](t, n, &messages.CreateTunnelClient{Opts: messages.TunnelClientOpts{
		Domain: "public.p2p", Key: upublic, Port: freePort(t), Protocol: "udp",
	}})
	if uid.Err != nil {
		t.Fatal(uid.Err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if addr = n.client(uid.ID).Info.Address; addr == "" {
			return errors.New("udp client not bound")
		}
		return nil
	})
	u := udpSocket(t, addr)
	testutil.Eventually(t, 5*time.Second, func() error {
		if _, err := u.Write([]byte("public")); err != nil {
			return err
		}
		if e := n.client(uid.ID).Info.LastError; e == "" {
			return errors.New("udp flow not refused")
		}
		return nil
	})
	_ = u.SetReadDeadline(time.Now())
	if n, err := u.Read(make([]byte, 64)); err == nil {
		t.Fatalf("answered %d bytes through a secure server's announced id", n)
	}
}

func (n *testNode) refused() int64 { return n.counters.RefusedStreams.Load() }

// openWithProof runs a client handshake with a proof the test chose.
func openWithProof(t *testing.T, conn transport.Conn, id string, proof []byte) (transport.Stream, error) {
	s, err := conn.OpenStream(t.Context())
	if err != nil {
		return nil, err
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	if err := writeFrame(s, &messages.TunnelOpen{ID: id, Proof: proof}); err != nil {
		return nil, err
	}
	var rep messages.TunnelOpenReply
	if err := readFrame(s, &rep); err != nil {
		return nil, err
	}
	if rep.Err != "" {
		return nil, errors.New(rep.Err)
	}
	return s, nil
}

// At the per-peer stream cap a new stream is refused with "too many
// streams" (the client's local connection is reset) and counted; the
// open ones keep working and a place freed is usable again.
func TestStreamCapPerPeer(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a := tn.node(func(d *Deps) { d.MaxStreamsPerPeer = 2 })
	b := tn.node(nil)
	connect(t, a, b)
	_, url := a.createServer(targetOpts(echoServer(t)))
	b.own("cap.p2p")
	cid, addr := b.createClient("cap.p2p", url)
	open := []net.Conn{openEcho(t, addr, "in"), openEcho(t, addr, "in")}
	before := a.refused()
	if err := dialEcho(addr, []byte("third")); err == nil {
		t.Fatal("a third stream got past a cap of 2")
	}
	if a.refused() != before+1 || !strings.Contains(b.client(cid).Info.LastError, "too many streams") {
		t.Fatalf("refused %d (want %d), client lastError %q", a.refused(), before+1, b.client(cid).Info.LastError)
	}
	capHolds(t, open, addr)
}
