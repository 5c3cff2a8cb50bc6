package tunnel

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// A service that ends its write side only (half-close) while the client
// goes on sending: the client sees the end of the service's data, and
// everything it sends afterwards still reaches the service, which sees
// the client's own end in turn: through a peer (in memory and over
// QUIC) and from a client on the server's node.
func TestServiceHalfCloseKeepsUpload(t *testing.T) {
	for _, mode := range []string{"mem", "quic", "same node"} {
		t.Run(mode, func(t *testing.T) {
			testutil.NoLeaks(t)
			tn := newTestNet(t, mode == "quic")
			a, b := tn.node(nil), tn.node(nil)
			connect(t, a, b)
			if mode == "same node" {
				b = a
			}
			got := make(chan int64, 1)
			target := tcpServer(t, func(c net.Conn) {
				_, _ = c.Write([]byte("hello"))
				_ = c.(*net.TCPConn).CloseWrite()
				n, err := io.Copy(io.Discard, c) // ends on the client's FIN
				if err != nil {
					n = -1
				}
				got <- n
			})
			c := dialThrough(t, a, b, "hc.p2p", target)
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			head, err := io.ReadAll(c)
			if err != nil || string(head) != "hello" {
				t.Fatalf("service's data %q, %v", head, err)
			}
			const upload = 4 << 20
			if _, err := c.Write(make([]byte, upload)); err != nil {
				t.Fatalf("write after the service's half-close: %v", err)
			}
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			select {
			case n := <-got:
				if n != upload {
					t.Fatalf("service got %d bytes, want %d", n, upload)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("service never saw the client's end")
			}
			// The client's side ends cleanly too.
			if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Fatalf("client read after both ends: %d, %v", n, err)
			}
		})
	}
}

// A local client that connects and never reads while the service
// streams: the service's writes stop once the buffers on the way are
// full (flow control from the client's socket back to the service), and
// what it wrote stays far below what it could have written: through a
// peer (in memory and over QUIC) and on the server's node.
func TestNeverReadingClientBoundsBuffers(t *testing.T) {
	for _, mode := range []string{"mem", "quic", "same node"} {
		t.Run(mode, func(t *testing.T) { testNeverReadingClient(t, mode) })
	}
}

func testNeverReadingClient(t *testing.T, mode string) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, mode == "quic")
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	if mode == "same node" {
		b = a
	}
	var written atomic.Int64
	target := tcpServer(t, func(c net.Conn) {
		writeOn(c, &written)
	})
	c := dialThrough(t, a, b, "slow.p2p", target)
	_ = c.(*net.TCPConn).SetReadBuffer(64 << 10)
	// Wait for the service to stall: the count stays put for a while.
	waitStalled(t, &written, "service", "a client that reads nothing")
	// The stalled connection is intact: what was buffered arrives.
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
}

// A client that opens connections, sends part of a request and resets
// them, many times over: every connection is gone afterwards on both
// nodes (open counters back to zero, no goroutine left, every place of
// the per-peer and per-tunnel caps free again), and the tunnel still
// works.
func TestAbandonedConnectionsAreReclaimed(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, true)
	const places = 64
	a := tn.node(func(d *Deps) { d.MaxStreamsPerPeer, d.MaxStreamsPerTunnel = places, places })
	b := tn.node(nil)
	connect(t, a, b)
	sid, url := a.createServer(targetOpts(echoServer(t)))
	b.own("rst.p2p")
	cid, addr := b.createClient("rst.p2p", url)
	const n = 1000
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			continue // the storm's own resets can reach a dial
		}
		if i%2 == 0 {
			_, _ = c.Write(bytes.Repeat([]byte{'x'}, 100))
		}
		tcpAbort(c)
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		s, c := a.server(sid).Info, b.client(cid).Info
		if s.ConnectionsOpen != 0 || c.ConnectionsOpen != 0 {
			return fmt.Errorf("open: server %d, client %d", s.ConnectionsOpen, c.ConnectionsOpen)
		}
		return nil
	})
	if got := a.server(sid).Info.ConnectionsTotal; got == 0 {
		t.Fatal("no reset connection reached the server")
	} else {
		t.Logf("%d of %d reset connections reached the server", got, n)
	}
	// Every place of the caps came back: as many connections as the caps
	// allow are all carried at once.
	for range places {
		openEcho(t, addr, "still works")
	}
}

// At the per-tunnel stream cap a new connection is refused with "too
// many streams" and counted, whichever peer it comes from and whatever
// that peer's own count is, and so is one of a client on the server's
// own node; open connections keep working and a freed place is usable
// again.
func TestStreamCapPerTunnel(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a := tn.node(func(d *Deps) { d.MaxStreamsPerTunnel = 2 })
	b, c := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	connect(t, a, c)
	sid, url := a.createServer(targetOpts(echoServer(t)))
	b.own("tcap.p2p")
	c.own("tcap.p2p")
	a.own("tcap.p2p")
	_, baddr := b.createClient("tcap.p2p", url)
	ccid, caddr := c.createClient("tcap.p2p", url)
	acid, aaddr := a.createClient("tcap.p2p", url)
	open := []net.Conn{openEcho(t, baddr, "in"), openEcho(t, caddr, "in")}
	before := a.refused()
	if err := dialEcho(caddr, []byte("third")); err == nil {
		t.Fatal("a third connection got past a tunnel cap of 2")
	}
	if a.refused() != before+1 || !strings.Contains(c.client(ccid).Info.LastError, "too many streams") {
		t.Fatalf("refused %d (want %d), client lastError %q", a.refused(), before+1, c.client(ccid).Info.LastError)
	}
	if err := dialEcho(aaddr, []byte("local")); err == nil {
		t.Fatal("a client on the server's node got past a tunnel cap of 2")
	}
	if a.refused() != before+2 || !strings.Contains(a.client(acid).Info.LastError, "too many streams") {
		t.Fatalf("refused %d (want %d), local client lastError %q", a.refused(), before+2, a.client(acid).Info.LastError)
	}
	if !strings.Contains(a.server(sid).Info.LastError, "too many streams") {
		t.Fatalf("server lastError %q", a.server(sid).Info.LastError)
	}
	capHolds(t, open, baddr)
}

// A peer's open header that never finishes, or finishes a byte at a time
// slower than the handshake allows, is cut off at the handshake timeout
// (the deadline does not move with each byte) and counted; an open for
// an id no server has is answered "unknown tunnel".
func TestUnfinishedAndUnknownOpens(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, true)
	a := tn.node(func(d *Deps) { d.HandshakeTimeout = 300 * time.Millisecond })
	b := tn.node(nil)
	connect(t, a, b)
	conn, _ := b.mesh.Conn(a.id.ID())
	t.Run("unfinished", func(t *testing.T) {
		before := a.refused()
		s, err := conn.OpenStream(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Write([]byte{0, 0, 0, 100, 0xa1, 0x62}); err != nil {
			t.Fatal(err)
		}
		cutOff(t, a, s, before, "an unfinished open")
	})
	t.Run("drip", func(t *testing.T) {
		before := a.refused()
		s, err := conn.OpenStream(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		frame := append([]byte{0, 0, 3, 0}, bytes.Repeat([]byte{0x61}, 768)...)
		stop := make(chan struct{})
		dripped := make(chan struct{})
		go func() { // one byte every 20 ms: the frame would take 15 s
			defer close(dripped)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for _, c := range frame {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := s.Write([]byte{c}); err != nil {
					return
				}
			}
		}()
		cutOff(t, a, s, before, "a dripping open")
		close(stop)
		<-dripped
	})
	t.Run("unknown id", func(t *testing.T) {
		before := a.refused()
		_, err := openTunnel(t.Context(), conn, strings.Repeat("ab", 32), nil, 0, time.Second, 5*time.Second)
		if err == nil || !strings.Contains(err.Error(), "unknown tunnel") {
			t.Fatalf("open of an unknown id = %v", err)
		}
		if a.refused() != before+1 {
			t.Fatalf("refused %d, want %d", a.refused(), before+1)
		}
	})
}

// cutOff reads s until the node under test (a) ends it, which must come
// well within the handshake timeout's bound, and waits for a to count
// the open as refused once more than before. what names the open.
func cutOff(t *testing.T, a *testNode, s io.Reader, before int64, what string) {
	t.Helper()
	if d, ok := s.(interface{ SetReadDeadline(time.Time) error }); ok {
		_ = d.SetReadDeadline(time.Now().Add(10 * time.Second))
	}
	start := time.Now()
	_, _ = io.ReadAll(s)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("%s held its stream %v", what, d)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if a.refused() != before+1 {
			return fmt.Errorf("refused %d, want %d", a.refused(), before+1)
		}
		return nil
	})
}

// A local program that opens more connections than a client carries at
// once (Deps.MaxConnsPerClient) has the extra ones reset at once,
// counted in Counters.RefusedConns and the client's lastError, instead
// of each waiting on a stream of its own; the open ones keep working
// and a freed place is usable again.
func TestConnCapPerClient(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a := tn.node(nil)
	b := tn.node(func(d *Deps) { d.MaxConnsPerClient = 2 })
	connect(t, a, b)
	_, url := a.createServer(targetOpts(echoServer(t)))
	b.own("ccap.p2p")
	cid, addr := b.createClient("ccap.p2p", url)
	open := []net.Conn{openEcho(t, addr, "in"), openEcho(t, addr, "in")}
	if err := dialEcho(addr, []byte("third")); err == nil {
		t.Fatal("a third connection got past a client cap of 2")
	}
	if n := b.counters.RefusedConns.Load(); n != 1 {
		t.Fatalf("RefusedConns = %d, want 1", n)
	}
	if e := b.client(cid).Info.LastError; !strings.Contains(e, "connections open") {
		t.Fatalf("client lastError %q", e)
	}
	capHolds(t, open, addr)
}

// A service that never reads while the client uploads: the client's
// writes stop once the buffers on the way are full, the other way round
// from TestNeverReadingClientBoundsBuffers.
func TestNeverReadingServiceBoundsBuffers(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, true)
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	release := make(chan struct{})
	target := tcpServer(t, func(c net.Conn) {
		_ = c.(*net.TCPConn).SetReadBuffer(64 << 10)
		<-release
	})
	defer close(release)
	c := dialThrough(t, a, b, "up.p2p", target)
	var written atomic.Int64
	go writeOn(c, &written)
	waitStalled(t, &written, "client", "a service that reads nothing")
}

// writeOn writes to c until a write fails, adding what went to written.
func writeOn(c net.Conn, written *atomic.Int64) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Write(buf)
		written.Add(int64(n))
		if err != nil {
			return
		}
	}
}

// waitStalled waits until written, what who has written to a peer that
// reads nothing (to), stays put for a second, and returns it; more than
// 64 MiB fails the test: flow control let too much through.
func waitStalled(t *testing.T, written *atomic.Int64, who, to string) int64 {
	t.Helper()
	const bound = 64 << 20
	last, since := int64(-1), time.Now()
	testutil.Eventually(t, 60*time.Second, func() error {
		n := written.Load()
		if n > bound {
			t.Fatalf("%s wrote %d bytes to %s (bound %d)", who, n, to, bound)
		}
		if n != last {
			last, since = n, time.Now()
			return fmt.Errorf("still writing (%d bytes)", n)
		}
		if time.Since(since) < time.Second {
			return errors.New("not stalled long enough")
		}
		return nil
	})
	t.Logf("%s stalled after %d bytes", who, last)
	return last
}

// openEcho dials addr, a tunnel client's port to an echo service, sees
// msg come back and leaves the connection open until the test ends.
func openEcho(t *testing.T, addr, msg string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := dialEchoConn(c, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	return c
}

// capHolds: the connections held at a cap (open, two) still carry, and
// once the second closes, a new one through addr gets its place.
func capHolds(t *testing.T, open []net.Conn, addr string) {
	t.Helper()
	if err := dialEchoConn(open[0], []byte("still")); err != nil {
		t.Fatal(err)
	}
	open[1].Close()
	testutil.Eventually(t, 5*time.Second, func() error { return dialEcho(addr, []byte("freed")) })
}
