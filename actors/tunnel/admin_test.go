package tunnel

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// Bad requests get the right sentinel and create nothing (not even in
// the store).
func TestBadInputCreatesNothing(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	n := tn.node(nil)
	n.own("mine.p2p")
	good := "hs://" + strings.Repeat("ab", 32)
	for _, tt := range []struct {
		name   string
		server *messages.TunnelServerOpts
		client *messages.TunnelClientOpts
		want   error
	}{
		{name: "server port 0", server: &messages.TunnelServerOpts{Port: 0}, want: messages.ErrBadTunnel},
		{name: "server port 70000", server: &messages.TunnelServerOpts{Port: 70000}, want: messages.ErrBadTunnel},
		{name: "server bad host", server: &messages.TunnelServerOpts{Port: 80, Host: "not a host!"}, want: messages.ErrBadTunnel},
		{name: "server host label too long", server: &messages.TunnelServerOpts{Port: 80, Host: strings.Repeat("a", 64) + ".com"}, want: messages.ErrBadTunnel},
		{name: "server secure with domain", server: &messages.TunnelServerOpts{Port: 80, Secure: true, Domain: "x.p2p"}, want: messages.ErrBadTunnel},
		{name: "server bad domain", server: &messages.TunnelServerOpts{Port: 80, Domain: "bad domain"}, want: messages.ErrBadTunnel},
		{name: "client port 0", client: &messages.TunnelClientOpts{Domain: "mine.p2p", Key: good, Port: 0}, want: messages.ErrBadTunnel},
		{name: "client port 70000", client: &messages.TunnelClientOpts{Domain: "mine.p2p", Key: good, Port: 70000}, want: messages.ErrBadTunnel},
		{name: "client no key", client: &messages.TunnelClientOpts{Domain: "mine.p2p", Port: 8080}, want: messages.ErrBadTunnel},
		{name: "client key without scheme", client: &messages.TunnelClientOpts{Domain: "mine.p2p", Key: strings.Repeat("ab", 32), Port: 8080}, want: messages.ErrBadTunnel},
		{name: "client key short", client: &messages.TunnelClientOpts{Domain: "mine.p2p", Key: "hs://abcd", Port: 8080}, want: messages.ErrBadTunnel},
		{name: "client key not hex", client: &messages.TunnelClientOpts{Domain: "mine.p2p", Key: "hs://" + strings.Repeat("zz", 32), Port: 8080}, want: messages.ErrBadTunnel},
		{name: "client no domain", client: &messages.TunnelClientOpts{Key: good, Port: 8080}, want: messages.ErrBadTunnel},
		{name: "client bad protocol", client: &messages.TunnelClientOpts{Domain: "mine.p2p", Key: good, Port: 8080, Protocol: "sctp"}, want: messages.ErrBadTunnel},
		{name: "client bad service name", client: &messages.TunnelClientOpts{Domain: "mine.p2p", Key: good, Port: 8080, ServiceName: "a/b"}, want: messages.ErrBadTunnel},
		{name: "client domain not owned", client: &messages.TunnelClientOpts{Domain: "other.p2p", Key: good, Port: 8080}, want: messages.ErrDomainNotOwned},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.server != nil {
				r := ask[*messages.CreateTunnelServerReply](t, n, &messages.CreateTunnelServer{Opts: *tt.server})
				err = r.Err
				if r.ID != "" {
					t.Fatalf("got id %q with an error", r.ID)
				}
			} else {
				r := ask[*messages.CreateTunnelClientReply](t, n, &messages.CreateTunnelClient{Opts: *tt.client})
				err = r.Err
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	for _, id := range []string{"nope", ""} {
		for _, req := range []any{&messages.DeleteTunnelServer{ID: id}, &messages.RestartTunnelServer{ID: id},
			&messages.DeleteTunnelClient{ID: id}, &messages.RestartTunnelClient{ID: id}} {
			if r := ask[*messages.TunnelWriteReply](t, n, req); !errors.Is(r.Err, messages.ErrUnknownTunnel) {
				t.Fatalf("%T(%q) = %v, want ErrUnknownTunnel", req, id, r.Err)
			}
		}
	}
	if s := ask[*messages.GetTunnelServersReply](t, n, &messages.GetTunnelServers{}).Servers; len(s) != 0 {
		t.Fatalf("servers created: %+v", s)
	}
	if c := ask[*messages.GetTunnelClientsReply](t, n, &messages.GetTunnelClients{}).Clients; len(c) != 0 {
		t.Fatalf("clients created: %+v", c)
	}
	if kvs, _ := n.db.List("tunnel:"); len(kvs) != 0 {
		t.Fatalf("stored: %v", kvs)
	}
	// A second server with the same key and a second client with the
	// same service id are refused too.
	opts := messages.TunnelServerOpts{Port: 9, Key: "twice"}
	n.createServer(opts)
	if r := ask[*messages.CreateTunnelServerReply](t, n, &messages.CreateTunnelServer{Opts: opts}); !errors.Is(r.Err, messages.ErrBadTunnel) {
		t.Fatalf("same key twice: %v", r.Err)
	}
	copts := messages.TunnelClientOpts{Domain: "mine.p2p", Key: good, Port: freePort(t), ServiceName: "web"}
	r := ask[*messages.CreateTunnelClientReply](t, n, &messages.CreateTunnelClient{Opts: copts})
	if r.Err != nil || r.ID != "mine.p2p_web" {
		t.Fatalf("create = %q, %v; want mine.p2p_web", r.ID, r.Err)
	}
	copts.Port = freePort(t)
	if r := ask[*messages.CreateTunnelClientReply](t, n, &messages.CreateTunnelClient{Opts: copts}); !errors.Is(r.Err, messages.ErrBadTunnel) {
		t.Fatalf("same service twice: %v", r.Err)
	}
}

// Servers and clients come back with the same keys when the supervisor
// starts again on the same store; connections alive at the stop are
// closed by it.
func TestPersistence(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	echo := targetOpts(echoServer(t))
	sid, url := a.createServer(echo) // random seed
	secure := echo
	secure.Secure, secure.Name = true, "hidden"
	ssid, surl := a.createServer(secure)
	b.own("p.p2p")
	b.own("s.p2p")
	cid, addr := b.createClient("p.p2p", url)
	scid, saddr := b.createClient("s.p2p", surl)
	for _, ad := range []string{addr, saddr} {
		if err := dialEcho(ad, []byte("before")); err != nil {
			t.Fatal(err)
		}
	}
	live, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := dialEchoConn(live, []byte("live")); err != nil {
		t.Fatal(err)
	}

	a.stop()
	b.stop()
	_ = live.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := live.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection outlived its client")
	}
	if got := a.mesh.Announced(); len(got) != 0 {
		t.Fatalf("stopped node still announces %v", got)
	}
	a.start()
	b.start()
	if s := a.server(sid); s.Info.URL != "" && s.Info.URL != url {
		t.Fatalf("url %q, want %q", s.Info.URL, url)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		for id, want := range map[string]string{sid: url, ssid: surl} {
			if s := a.server(id); s.Info.State != messages.TunnelRunning || s.Info.URL != want {
				return fmt.Errorf("server %s: %+v, want url %s", id, s.Info, want)
			}
		}
		return nil
	})
	if s := a.server(ssid); s.Opts.Name != "hidden" || !s.Opts.Secure {
		t.Fatalf("opts not kept: %+v", s.Opts)
	}
	for id, ad := range map[string]string{cid: addr, scid: saddr} {
		if got := b.waitClient(id, messages.TunnelRunning); got != ad {
			t.Fatalf("client %s on %s, want %s", id, got, ad)
		}
		testutil.Eventually(t, 5*time.Second, func() error { return dialEcho(ad, []byte("after")) })
	}
	// Deleted ones stay deleted.
	if r := ask[*messages.TunnelWriteReply](t, a, &messages.DeleteTunnelServer{ID: sid}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := ask[*messages.TunnelWriteReply](t, b, &messages.DeleteTunnelClient{ID: cid}); r.Err != nil {
		t.Fatal(r.Err)
	}
	// The port is free once delete answered.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port of a deleted client: %v", err)
	}
	ln.Close()
	a.stop()
	b.stop()
	a.start()
	b.start()
	if s := ask[*messages.GetTunnelServersReply](t, a, &messages.GetTunnelServers{}).Servers; len(s) != 1 || s[0].ID != ssid {
		t.Fatalf("servers after restart: %+v", s)
	}
	if c := ask[*messages.GetTunnelClientsReply](t, b, &messages.GetTunnelClients{}).Clients; len(c) != 1 || c[0].ID != scid {
		t.Fatalf("clients after restart: %+v", c)
	}
}

func dialEchoConn(c net.Conn, msg []byte) error {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	_, err := io.ReadFull(c, got)
	return err
}

// A server with a domain claims it with its URL; the listing shows opts
// and no seed.
func TestServerClaimsDomain(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	n := tn.node(nil)
	hints := subscribeHints(t, n)
	sid, url := n.createServer(messages.TunnelServerOpts{Port: 8080, Domain: "Site.P2P.", Key: "seed", Name: "web", Log: 1})
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := n.ledger.claim("site.p2p"); got != url {
			return fmt.Errorf("claim = %q, want %q", got, url)
		}
		return hints.has(messages.HintDatabase)
	})
	if err := hints.has(messages.HintTunnel); err != nil {
		t.Fatal(err)
	}
	if err := hints.has(messages.HintTunnelLog); err != nil {
		t.Fatal(err)
	}
	s := n.server(sid)
	if s.Opts.Key != "" || s.Opts.Domain != "site.p2p" || s.Opts.Host != "127.0.0.1" || s.Opts.Name != "web" {
		t.Fatalf("opts %+v", s.Opts)
	}
	if want := deriveServerKey("seed", false).URL; url != want {
		t.Fatalf("url %q, want %q", url, want)
	}
	// Restart claims again (it may reassign the domain).
	n.ledger.mu.Lock()
	delete(n.ledger.claims, "site.p2p")
	n.ledger.mu.Unlock()
	if r := ask[*messages.TunnelWriteReply](t, n, &messages.RestartTunnelServer{ID: sid}); r.Err != nil {
		t.Fatal(r.Err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if n.ledger.claim("site.p2p") != url {
			return errors.New("not claimed again")
		}
		return nil
	})
}

// A server claims its domain again at each start (the node's restart,
// tunnel-restart) keeping the ssl flag its claim has (add-domain set it:
// the edge reaches the target over HTTPS); a claim with ssl false had the
// edge speak plain HTTP to it after every restart. The ledger keeps it
// (actors/ledger TestAddDomainKeepSSL).
func TestServerClaimKeepsSSL(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	n := tn.node(nil)
	sid, url := n.createServer(messages.TunnelServerOpts{Port: 8443, Domain: "tls.p2p", Key: "tls"})
	claimed := func(after int) {
		t.Helper()
		testutil.Eventually(t, 5*time.Second, func() error {
			adds := n.ledger.added()
			if len(adds) <= after {
				return errors.New("not claimed")
			}
			if a := adds[len(adds)-1]; a.Domain != "tls.p2p" || a.Hash != url || !a.KeepSSL {
				return fmt.Errorf("claimed with %+v, want ssl kept", a)
			}
			return nil
		})
	}
	claimed(0)
	before := len(n.ledger.added())
	if r := ask[*messages.TunnelWriteReply](t, n, &messages.RestartTunnelServer{ID: sid}); r.Err != nil {
		t.Fatal(r.Err)
	}
	claimed(before)
}

// A peer that opens a stream and says nothing is cut off after the
// handshake timeout; one that sends garbage at once.
func TestHandshakeTimeoutAndGarbage(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a := tn.node(func(d *Deps) { d.HandshakeTimeout = 200 * time.Millisecond })
	b := tn.node(nil)
	connect(t, a, b)
	conn, _ := b.mesh.Conn(a.id.ID())
	for _, tt := range []struct {
		name string
		send []byte
	}{
		{"silent", nil},
		{"oversize frame", []byte{0, 0, 0x10, 0}},
		{"garbage", []byte{0, 0, 0, 3, 0xff, 0xfe, 0xfd}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := a.refused()
			s, err := conn.OpenStream(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if tt.send != nil {
				if _, err := s.Write(tt.send); err != nil {
					t.Fatal(err)
				}
			}
			_ = s.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadAll(s); err != nil && !errors.Is(err, io.ErrClosedPipe) {
				t.Logf("read: %v", err)
			}
			testutil.Eventually(t, 5*time.Second, func() error {
				if a.refused() != before+1 {
					return fmt.Errorf("refused %d, want %d", a.refused(), before+1)
				}
				return nil
			})
		})
	}
}

// A client with no server waits in starting and refuses connections;
// once the server is there the next connection works. A client restart
// frees the port and closes its connections first.
func TestClientWaitsForServerAndRestarts(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	opts := targetOpts(echoServer(t))
	opts.Key = "later"
	url := deriveServerKey("later", false).URL
	b.own("wait.p2p")
	hints := subscribeHints(t, b)
	r := ask[*messages.CreateTunnelClientReply](t, b, &messages.CreateTunnelClient{Opts: messages.TunnelClientOpts{
		Domain: "wait.p2p", Key: strings.ToUpper(url[:5]) + strings.ToUpper(url[5:]), Port: freePort(t)}})
	if r.Err == nil {
		t.Fatal("HS:// in capitals accepted") // the scheme is lowercase; the hex may be either case
	}
	r = ask[*messages.CreateTunnelClientReply](t, b, &messages.CreateTunnelClient{Opts: messages.TunnelClientOpts{
		Domain: "wait.p2p", Key: "hs://" + strings.ToUpper(url[5:]), Port: freePort(t)}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	addr := b.waitClient(r.ID, messages.TunnelStarting)
	testutil.Eventually(t, 5*time.Second, func() error {
		if addr = b.client(r.ID).Info.Address; addr == "" {
			return errors.New("not listening yet")
		}
		return nil
	})
	if err := dialEcho(addr, []byte("nobody home")); err == nil {
		t.Fatal("connection carried with no server")
	}
	if c := b.client(r.ID); c.Opts.Key != url || c.Opts.Protocol != "tcp" {
		t.Fatalf("opts %+v", c.Opts)
	}
	a.createServer(opts)
	b.waitClient(r.ID, messages.TunnelRunning)
	testutil.Eventually(t, 5*time.Second, func() error { return dialEcho(addr, []byte("now")) })
	if err := hints.has(messages.HintTunnelClients); err != nil {
		t.Fatal(err)
	}

	live, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := dialEchoConn(live, []byte("live")); err != nil {
		t.Fatal(err)
	}
	if w := ask[*messages.TunnelWriteReply](t, b, &messages.RestartTunnelClient{ID: r.ID}); w.Err != nil {
		t.Fatal(w.Err)
	}
	_ = live.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := live.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection survived the client restart")
	}
	if got := b.waitClient(r.ID, messages.TunnelRunning); got != addr {
		t.Fatalf("rebound on %s, want %s", got, addr)
	}
	testutil.Eventually(t, 5*time.Second, func() error { return dialEcho(addr, []byte("after restart")) })
}

// A client on the node that serves the key dials the target directly.
func TestClientOfLocalServer(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	n := tn.node(nil)
	sid, url := n.createServer(targetOpts(echoServer(t)))
	n.own("self.p2p")
	cid, addr := n.createClient("self.p2p", url)
	if err := dialEcho(addr, []byte("to myself")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		s, c := n.server(sid).Info, n.client(cid).Info
		if s.ConnectionsTotal != 1 || c.ConnectionsTotal != 1 || s.ConnectionsOpen != 0 || c.BytesOut != 9 {
			return fmt.Errorf("server %+v client %+v", s.TunnelCounters, c.TunnelCounters)
		}
		return nil
	})
}

// A server on the client's node whose target refuses is one provider of
// the key among others: a peer serving the same seed (a second machine)
// carries the connection, as the next provider does when a peer's target
// refuses.
func TestLocalTargetDownTriesPeers(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	down := targetOpts(net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))))
	down.Key = "two machines"
	up := targetOpts(echoServer(t))
	up.Key = down.Key
	sid, url := a.createServer(down)
	b.createServer(up)
	a.own("ha.p2p")
	_, addr := a.createClient("ha.p2p", url)
	if err := dialEcho(addr, []byte("through the peer")); err != nil {
		t.Fatal(err)
	}
	if e := a.server(sid).Info.LastError; !strings.Contains(e, "dial") {
		t.Fatalf("local server's lastError %q, want its failed dial", e)
	}
}

// A bind that fails leaves the client in error with the reason; the
// client binds once the port is free.
func TestClientBindError(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	n := tn.node(nil)
	n.own("busy.p2p")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	r := ask[*messages.CreateTunnelClientReply](t, n, &messages.CreateTunnelClient{Opts: messages.TunnelClientOpts{
		Domain: "busy.p2p", Key: "hs://" + strings.Repeat("0", 64), Port: port}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	n.waitClient(r.ID, messages.TunnelError)
	if c := n.client(r.ID); !strings.Contains(c.Info.Error, "address already in use") {
		t.Fatalf("error %q", c.Info.Error)
	}
	ln.Close()
	n.waitClient(r.ID, messages.TunnelStarting) // bound; no server serves that key
}
