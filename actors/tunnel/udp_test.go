package tunnel

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"peerdns/actors/tunnel/tunneltest"
	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
)

// udpEcho is tunneltest.UDPEcho's address as a string.
func udpEcho(t testing.TB) string { return tunneltest.UDPEcho(t).String() }

// createUDPClient makes a UDP client for url on domain and waits until
// it runs; it returns its address.
func (n *testNode) createUDPClient(domain, url string) (id, addr string) {
	n.t.Helper()
	r := ask[*messages.CreateTunnelClientReply](n.t, n, &messages.CreateTunnelClient{Opts: messages.TunnelClientOpts{
		Domain: domain, Key: url, Port: freePort(n.t), Protocol: "udp",
	}})
	if r.Err != nil {
		n.t.Fatalf("create udp client: %v", r.Err)
	}
	return r.ID, n.waitClient(r.ID, messages.TunnelRunning)
}

// udpSocket is tunneltest.UDPSocket.
func udpSocket(t testing.TB, addr string) *net.UDPConn { return tunneltest.UDPSocket(t, addr) }

// udpAsk sends msg on c until an answer arrives (UDP may lose either)
// and returns the address the echo service saw it from.
func udpAsk(t testing.TB, c *net.UDPConn, msg string) (seenFrom string) {
	t.Helper()
	buf := make([]byte, 4096)
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for {
			n, err := c.Read(buf)
			if err != nil {
				return fmt.Errorf("no answer to %q: %w", msg, err)
			}
			got, from, ok := bytes.Cut(buf[:n], []byte("|"))
			if !ok {
				return fmt.Errorf("answer %q", buf[:n])
			}
			if string(got) == msg { // an answer to an earlier resend is skipped
				seenFrom = string(from)
				return nil
			}
		}
	})
	return seenFrom
}

// udpTunnel makes a UDP server for a fresh echo service on a and a UDP
// client for it on b; it returns the server and client ids and the
// client's address.
func udpTunnel(t *testing.T, a, b *testNode, domain string) (sid, cid, addr string) {
	t.Helper()
	o := targetOpts(udpEcho(t))
	o.UDP = true
	sid, url := a.createServer(o)
	b.own(domain)
	cid, addr = b.createUDPClient(domain, url)
	return sid, cid, addr
}

// Two client sockets get a flow each (the echo service sees two source
// addresses, each socket only its own answers), on QUIC and in memory;
// counters count flows and payload bytes.
func TestUDPEchoIndependentFlows(t *testing.T) {
	for _, quic := range []bool{true, false} {
		t.Run(map[bool]string{true: "quic", false: "mem"}[quic], func(t *testing.T) {
			testutil.NoLeaks(t)
			tn := newTestNet(t, quic)
			a, b := tn.node(nil), tn.node(nil)
			connect(t, a, b)
			sid, cid, addr := udpTunnel(t, a, b, "udp.p2p")
			c1, c2 := udpSocket(t, addr), udpSocket(t, addr)
			from1 := udpAsk(t, c1, "one")
			from2 := udpAsk(t, c2, "two")
			if from1 == from2 {
				t.Fatalf("both sockets reached the service from %s: one flow for two sockets", from1)
			}
			if again := udpAsk(t, c1, "one again"); again != from1 {
				t.Fatalf("socket 1 came from %s, then %s: its flow changed", from1, again)
			}
			// An answer can overtake the counting of its request.
			sent := int64(len("one" + "two" + "one again"))
			testutil.Eventually(t, 5*time.Second, func() error {
				s, c := a.server(sid).Info, b.client(cid).Info
				if s.ConnectionsOpen != 2 || c.ConnectionsOpen != 2 || c.ConnectionsTotal != 2 {
					return fmt.Errorf("flows open: server %d, client %d (total %d); want 2", s.ConnectionsOpen, c.ConnectionsOpen, c.ConnectionsTotal)
				}
				if c.BytesOut < sent || s.BytesIn < sent || c.BytesIn < sent || s.BytesOut < sent {
					return fmt.Errorf("counters: client %+v, server %+v", c.TunnelCounters, s.TunnelCounters)
				}
				return nil
			})
			// A datagram over the QUIC datagram limit is dropped and counted.
			before := b.counters.DroppedDatagrams.Load()
			if _, err := c1.Write(bytes.Repeat([]byte("x"), 1500)); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, 5*time.Second, func() error {
				if b.counters.DroppedDatagrams.Load() != before+1 {
					return fmt.Errorf("dropped %d, want %d", b.counters.DroppedDatagrams.Load(), before+1)
				}
				if e := b.client(cid).Info.LastError; !strings.Contains(e, "too large") {
					return fmt.Errorf("client lastError %q", e)
				}
				return nil
			})
			udpAsk(t, c2, "still") // the flow goes on
		})
	}
}

// A flow idle for UDPIdleTimeout ends on both sides; the socket's next
// datagram opens a new one.
func TestUDPIdleFlowExpires(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, true)
	idle := func(d *Deps) { d.UDPIdleTimeout = 300 * time.Millisecond }
	a, b := tn.node(idle), tn.node(idle)
	connect(t, a, b)
	sid, cid, addr := udpTunnel(t, a, b, "idle.p2p")
	c := udpSocket(t, addr)
	first := udpAsk(t, c, "hello")
	testutil.Eventually(t, 10*time.Second, func() error {
		if s, cl := a.server(sid).Info, b.client(cid).Info; s.ConnectionsOpen != 0 || cl.ConnectionsOpen != 0 {
			return fmt.Errorf("flows open: server %d, client %d", s.ConnectionsOpen, cl.ConnectionsOpen)
		}
		return nil
	})
	if again := udpAsk(t, c, "back"); again == first {
		t.Fatalf("after expiry the service saw the same source %s: the old flow lived on", first)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if tot := b.client(cid).Info.ConnectionsTotal; tot != 2 {
			return fmt.Errorf("client flows total %d, want 2", tot)
		}
		return nil
	})
}

// Beyond MaxFlowsPerPeer a server refuses new flows ("too many flows",
// counted as a refused stream); the open ones go on, and a place freed
// by expiry is usable again.
func TestUDPFlowCap(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, true)
	a := tn.node(func(d *Deps) { d.MaxFlowsPerPeer = 2; d.UDPIdleTimeout = time.Second })
	b := tn.node(func(d *Deps) { d.UDPIdleTimeout = time.Second })
	connect(t, a, b)
	_, cid, addr := udpTunnel(t, a, b, "cap.p2p")
	c1, c2, c3 := udpSocket(t, addr), udpSocket(t, addr), udpSocket(t, addr)
	udpAsk(t, c1, "one")
	udpAsk(t, c2, "two")
	before := a.refused()
	if _, err := c3.Write([]byte("three")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if a.refused() != before+1 || !strings.Contains(b.client(cid).Info.LastError, "too many flows") {
			return fmt.Errorf("refused %d (want %d), client lastError %q", a.refused(), before+1, b.client(cid).Info.LastError)
		}
		return nil
	})
	_ = c3.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := c3.Read(make([]byte, 100)); err == nil {
		t.Fatalf("a flow beyond the cap was answered (%d bytes)", n)
	}
	udpAsk(t, c1, "one still")
	// Once c2's flow expires (c1 keeps talking), c3 gets a place.
	testutil.Eventually(t, 10*time.Second, func() error {
		udpAsk(t, c1, "keepalive")
		if _, err := c3.Write([]byte("three again")); err != nil {
			return err
		}
		_ = c3.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c3.Read(make([]byte, 100)); err != nil {
			return fmt.Errorf("c3: %w", err)
		}
		return nil
	})
}

// A TCP and a UDP client of a domain may share a port (a DNS server, a
// game with its RCON on the game's port): they bind different sockets.
// A second client of one protocol on the port is refused.
func TestTCPAndUDPClientsShareAPort(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	_, turl := a.createServer(targetOpts(echoServer(t)))
	uo := targetOpts(udpEcho(t))
	uo.UDP = true
	_, uurl := a.createServer(uo)
	b.own("both.p2p")
	port := freePort(t)
	for _, c := range []struct{ url, protocol string }{{turl, "tcp"}, {uurl, "udp"}} {
		r := ask[*messages.CreateTunnelClientReply](t, b, &messages.CreateTunnelClient{Opts: messages.TunnelClientOpts{
			Domain: "both.p2p", Key: c.url, Port: port, Protocol: c.protocol,
		}})
		if r.Err != nil {
			t.Fatalf("%s client on port %d: %v", c.protocol, port, r.Err)
		}
		addr := b.waitClient(r.ID, messages.TunnelRunning)
		if c.protocol == "tcp" {
			if err := dialEcho(addr, []byte("tcp")); err != nil {
				t.Fatal(err)
			}
		} else {
			udpAsk(t, udpSocket(t, addr), "udp")
		}
	}
	r := ask[*messages.CreateTunnelClientReply](t, b, &messages.CreateTunnelClient{Opts: messages.TunnelClientOpts{
		Domain: "both.p2p", Key: turl, Port: port,
	}})
	if !errors.Is(r.Err, messages.ErrBadTunnel) {
		t.Fatalf("a second tcp client on the port: %v", r.Err)
	}
}

// A client on the node of its server carries the flow straight to the
// target; a TCP client of a UDP server is refused.
func TestUDPLocalServerAndWrongProtocol(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	o := targetOpts(udpEcho(t))
	o.UDP = true
	sid, url := a.createServer(o)
	a.own("local.p2p")
	_, addr := a.createUDPClient("local.p2p", url)
	udpAsk(t, udpSocket(t, addr), "local")
	// The counters follow the datagrams (the echo can come back before
	// the flow has added what it carried).
	testutil.Eventually(t, 5*time.Second, func() error {
		if s := a.server(sid).Info; s.ConnectionsTotal != 1 || s.BytesIn != int64(len("local")) {
			return fmt.Errorf("local server counters %+v", s.TunnelCounters)
		}
		return nil
	})
	b.own("tcp.p2p")
	_, taddr := b.createClient("tcp.p2p", url)
	before := a.refused()
	if err := dialEcho(taddr, []byte("tcp")); err == nil {
		t.Fatal("a tcp connection went through a udp server")
	}
	if a.refused() != before+1 {
		t.Fatalf("refused %d, want %d", a.refused(), before+1)
	}
}

// A datagram longer than a flow reads (maxUDPRead) is dropped and
// counted on the path that has no QUIC datagram limit to drop it: a
// client on the node of its server. Neither the target nor the client
// socket is handed its first maxUDPRead bytes as if they were the whole.
func TestUDPLocalOversizeDropped(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a := tn.node(nil)
	o := targetOpts(udpEcho(t))
	o.UDP = true
	_, url := a.createServer(o)
	a.own("big.p2p")
	_, addr := a.createUDPClient("big.p2p", url)
	c := udpSocket(t, addr)
	udpAsk(t, c, "open")
	dropped := func(want int64) {
		t.Helper()
		testutil.Eventually(t, 5*time.Second, func() error {
			if got := a.counters.DroppedDatagrams.Load(); got != want {
				return fmt.Errorf("dropped %d, want %d", got, want)
			}
			return nil
		})
	}
	before := a.counters.DroppedDatagrams.Load()
	// Too long from the client socket: the target must not get it cut.
	if _, err := c.Write(bytes.Repeat([]byte("x"), maxUDPRead+1000)); err != nil {
		t.Fatal(err)
	}
	dropped(before + 1)
	// Short enough to reach the target, whose echo (it adds "|" and the
	// address it saw) is too long to read whole: the client must not
	// get it cut.
	if _, err := c.Write(bytes.Repeat([]byte("y"), maxUDPRead-8)); err != nil {
		t.Fatal(err)
	}
	dropped(before + 2)
	// The flow goes on, and nothing cut came back before its answer
	// (one flow's replies come back in order over loopback).
	buf := make([]byte, 64<<10)
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, err := c.Write([]byte("after")); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for {
			n, err := c.Read(buf)
			if err != nil {
				return err
			}
			if n > 0 && (buf[0] == 'x' || buf[0] == 'y') {
				t.Fatalf("got a datagram of %d bytes cut from an oversize one", n)
			}
			if bytes.HasPrefix(buf[:n], []byte("after|")) {
				return nil
			}
		}
	})
}

// A client whose flows cannot open (here a UDP client of a TCP server,
// refused "wrong protocol") waits before it tries again: a program that
// keeps sending costs the server a handshake per wait, not one per
// datagram, and what it sends meanwhile is dropped and counted.
func TestUDPRefusedFlowsWait(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a := tn.node(nil)
	// The default wait (the harness shortens it for other tests).
	b := tn.node(func(d *Deps) { d.LookupBackoff = transport.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second} })
	connect(t, a, b)
	_, url := a.createServer(targetOpts(echoServer(t)))
	b.own("wait.p2p")
	_, addr := b.createUDPClient("wait.p2p", url)
	c := udpSocket(t, addr)
	refusedBefore, droppedBefore := a.refused(), b.counters.DroppedDatagrams.Load()
	// A datagram every 5 ms for 500 ms: the first opens a flow
	// (refused), then the waits (LookupBackoff: 100 ms doubling, each
	// at least half that) leave room for a few more attempts.
	const sent = 100
	pace := time.NewTicker(5 * time.Millisecond)
	defer pace.Stop()
	for range sent {
		if _, err := c.Write([]byte("anyone?")); err != nil {
			t.Fatal(err)
		}
		<-pace.C
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if a.refused() == refusedBefore {
			return errors.New("no flow refused yet")
		}
		return nil
	})
	refused := a.refused() - refusedBefore
	dropped := b.counters.DroppedDatagrams.Load() - droppedBefore
	if refused < 1 || refused > 6 {
		t.Fatalf("%d datagrams in 500 ms made %d refused flows at the server, want 1-6", sent, refused)
	}
	// Every datagram is dropped and counted but those an opening flow
	// held (up to maxPendingPerFlow each, dropped uncounted with it).
	if least := sent - refused*maxPendingPerFlow; dropped < least {
		t.Fatalf("%d of %d datagrams counted as dropped, want at least %d", dropped, sent, least)
	}
	t.Logf("%d datagrams: %d flows refused, %d dropped while waiting", sent, refused, dropped)
}

// A client socket that keeps sending, more often than the idle timeout,
// through a server that restarts (which forgets its flows while the peer
// connection stays up) gets answers again at once: the server answers
// the forgotten flow's datagrams with an unknown-flow datagram, the
// client ends that flow and the socket's next datagram registers a new
// one. It used to wait for an idle timeout that never came.
func TestUDPServerRestartBusyClient(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, true)
	a, b := tn.node(nil), tn.node(nil) // the default idle timeout: 60 s
	connect(t, a, b)
	sid, cid, addr := udpTunnel(t, a, b, "urst.p2p")
	c := udpSocket(t, addr)
	first := udpAsk(t, c, "hello")
	if r := ask[*messages.TunnelWriteReply](t, a, &messages.RestartTunnelServer{ID: sid}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if again := udpAsk(t, c, "after the restart"); again == first {
		t.Fatalf("the service saw the old flow's source %s after the restart", first)
	}
	if tot := b.client(cid).Info.ConnectionsTotal; tot != 2 {
		t.Fatalf("client flows total %d, want 2", tot)
	}
}

// A client whose key reaches a server of the other protocol on its node
// cannot carry a connection there (route refuses it): it is not running,
// and says why.
func TestClientOfLocalServerOfOtherProtocol(t *testing.T) {
	testutil.NoLeaks(t)
	n := newTestNet(t, false).node(nil)
	udpOpts := targetOpts(echoServer(t))
	udpOpts.UDP = true
	_, uurl := n.createServer(udpOpts)
	_, turl := n.createServer(targetOpts(echoServer(t)))
	n.own("mixed.p2p")
	for _, c := range []struct{ key, proto, want string }{
		{uurl, "tcp", "is a udp tunnel"},
		{turl, "udp", "is not a udp tunnel"},
	} {
		r := ask[*messages.CreateTunnelClientReply](t, n, &messages.CreateTunnelClient{Opts: messages.TunnelClientOpts{
			Domain: "mixed.p2p", Key: c.key, Port: freePort(t), Protocol: c.proto}})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		testutil.Eventually(t, 5*time.Second, func() error {
			info := n.client(r.ID).Info
			if info.State != messages.TunnelStarting || !strings.Contains(info.Error, c.want) {
				return fmt.Errorf("%s client of a local server of the other protocol: state %q (%s)", c.proto, info.State, info.Error)
			}
			return nil
		})
	}
}
