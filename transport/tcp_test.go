package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// tcpPair dials to over TCP from from and takes to's end: out is from's
// end of the connection, in is to's.
func tcpPair(tb testing.TB, from, to *MultiEndpoint) (out, in Conn) {
	tb.Helper()
	out, err := from.DialTCP(ctxT(tb), to.Addr().String(), to.ID())
	if err != nil {
		tb.Fatal(err)
	}
	in, err = to.Accept(ctxT(tb))
	if err != nil {
		tb.Fatal(err)
	}
	in.Admit() // as the peer layer does once the handshake is done
	return out, in
}

// quicPair dials to from from over QUIC and takes to's end.
func quicPair(tb testing.TB, from, to *MultiEndpoint) (out, in Conn) {
	tb.Helper()
	out, err := from.q.Dial(ctxT(tb), to.Addr().String(), to.ID())
	if err != nil {
		tb.Fatal(err)
	}
	in, err = to.Accept(ctxT(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return out, in
}

// newMulti starts a MultiEndpoint on 127.0.0.1:0; tune, if given,
// changes its Config first.
func newMulti(t testing.TB, opt Options, tune ...func(*Config)) *MultiEndpoint {
	t.Helper()
	checkLeaks(t)
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	lb := &testutil.LogBuffer{}
	cfg := Config{Identity: id, ListenAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(lb, nil))}
	for _, f := range tune {
		f(&cfg)
	}
	e, err := ListenMulti(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// exercise checks a connected pair end to end: control frames both
// ways, a stream with a half-close, a datagram, and a keying material
// both ends agree on.
func exercise(t *testing.T, a, b Conn) {
	t.Helper()
	if err := a.Send(&messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: "x", Network: "n"}}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	m, err := b.Recv()
	if err != nil || m.Kind != messages.KindHello || m.Hello.Network != "n" {
		t.Fatalf("Recv: %v %+v", err, m)
	}
	if err := b.Send(&messages.Envelope{Kind: messages.KindVV}); err != nil {
		t.Fatal(err)
	}
	if m, err := a.Recv(); err != nil || m.Kind != messages.KindVV {
		t.Fatalf("Recv back: %v %+v", err, m)
	}
	// A stream, with half-close: b answers after reading a's end of data.
	go func() {
		s, err := b.AcceptStream(ctxT(t))
		if err != nil {
			return
		}
		defer s.Close()
		got, _ := io.ReadAll(s)
		_, _ = s.Write(append([]byte("echo:"), got...))
	}()
	s, err := a.OpenStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("0123456789"), 100_000) // 1 MB: several flow-control windows
	if _, err := s.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = s.SetReadDeadline(time.Now().Add(10 * time.Second))
	back, err := io.ReadAll(s)
	if err != nil || !bytes.Equal(back, append([]byte("echo:"), payload...)) {
		t.Fatalf("stream echo: %v, %d bytes", err, len(back))
	}
	s.Close()
	if err := a.SendDatagram([]byte("dgram")); err != nil {
		t.Fatal(err)
	}
	if d, err := b.ReceiveDatagram(ctxT(t)); err != nil || string(d) != "dgram" {
		t.Fatalf("datagram: %v %q", err, d)
	}
	if err := a.SendDatagram(make([]byte, maxStreamDatagram+1)); !errors.Is(err, ErrDatagramTooLarge) {
		t.Fatalf("oversized datagram: %v", err)
	}
	ka, _ := a.ExportKeyingMaterial("l", nil, 32)
	kb, _ := b.ExportKeyingMaterial("l", nil, 32)
	if len(ka) != 32 || !bytes.Equal(ka, kb) {
		t.Fatal("keying material differs between the ends")
	}
}

func TestTCPPathEndToEnd(t *testing.T) {
	a := newMulti(t, Options{})
	b := newMulti(t, Options{})
	if a.TCPAddr().String() != a.Addr().String() {
		t.Fatalf("TCP listens on %s, QUIC on %s: want the same port", a.TCPAddr(), a.Addr())
	}
	out, in := tcpPair(t, b, a)
	if p, _ := PathOf(in); p != PathTCP || in.PeerID() != b.ID() || out.PeerID() != a.ID() || in.Outbound() || !out.Outbound() {
		t.Fatalf("path %q, ids %.8s/%.8s", p, in.PeerID(), out.PeerID())
	}
	exercise(t, out, in)
	exercise(t, in, out)
	out.Close("done")
	testutil.Eventually(t, 5*time.Second, func() error {
		select {
		case <-in.Done():
			return nil
		default:
			return errors.New("inbound end still open")
		}
	})
}

func TestTCPWrongKeyRefused(t *testing.T) {
	a := newMulti(t, Options{})
	b := newMulti(t, Options{})
	other, _ := identity.Generate()
	if _, err := b.DialTCP(ctxT(t), a.Addr().String(), other.ID()); !errors.Is(err, ErrWrongPeer) {
		t.Fatalf("dial with the wrong key: %v, want ErrWrongPeer", err)
	}
	if _, err := a.DialTCP(ctxT(t), a.Addr().String(), ""); !errors.Is(err, ErrSelf) {
		t.Fatalf("dial self: %v, want ErrSelf", err)
	}
	if _, err := a.DialTCP(ctxT(t), a.Addr().String(), other.ID()); !errors.Is(err, ErrSelf) {
		t.Fatalf("dial self expecting another key: %v, want ErrSelf", err)
	}
}

// A peer whose QUIC socket does not answer is reached over TCP.
func TestDialFallsBackToTCP(t *testing.T) {
	a := newMulti(t, Options{})
	b := newMulti(t, Options{TCPDelay: 50 * time.Millisecond})
	_ = a.q.Close() // a's UDP socket is gone: only its TCP listener answers
	out, err := b.Dial(ctxT(t), a.Addr().String(), a.ID())
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := PathOf(out); p != PathTCP {
		t.Fatalf("path %q, want tcp", p)
	}
	if _, err := a.Accept(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := b.Stats().TCPDialed; n != 1 {
		t.Fatalf("TCPDialed = %d", n)
	}
}

// With both paths open, the dial ends on QUIC.
func TestDialPrefersQUIC(t *testing.T) {
	a := newMulti(t, Options{})
	b := newMulti(t, Options{TCPDelay: 5 * time.Second})
	out, err := b.Dial(ctxT(t), a.Addr().String(), a.ID())
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := PathOf(out); p != PathQUIC {
		t.Fatalf("path %q, want quic", p)
	}
}

// When TCP wins a dial because QUIC is slow (here: its first packets
// are lost), the QUIC attempt goes on, and once it connects it is handed
// to Accept as an outbound connection for the peer layer to move to.
func TestDialUpgradesToLateQUIC(t *testing.T) {
	a := newMulti(t, Options{})
	b := newMulti(t, Options{TCPDelay: 20 * time.Millisecond})
	fw := newGatedForwarder(t, a.Addr().String())
	out, err := b.Dial(ctxT(t), fw.addr, a.ID())
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := PathOf(out); p != PathTCP {
		t.Fatalf("path %q, want tcp while UDP is dropped", p)
	}
	fw.open.Store(true)
	late, err := b.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := PathOf(late); p != PathQUIC || !late.Outbound() || late.PeerID() != a.ID() {
		t.Fatalf("late connection: path %q outbound %v peer %.8s", p, late.Outbound(), late.PeerID())
	}
	if s := b.Stats(); s.QUICUpgrades != 1 || s.TCPDialed != 1 {
		t.Fatalf("stats %+v", s)
	}
	for range 2 { // a sees both: the TCP one, then the QUIC one
		if _, err := a.Accept(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
}

// gatedForwarder forwards TCP and UDP on one port to target; UDP packets
// from the client are dropped until open is set.
type gatedForwarder struct {
	addr string
	open atomic.Bool
}

func newGatedForwarder(t *testing.T, target string) *gatedForwarder {
	t.Helper()
	pc, ln := testutil.ListenPair(t)
	ua, _ := net.ResolveUDPAddr("udp", target)
	up, err := net.DialUDP("udp", nil, ua)
	if err != nil {
		t.Fatal(err)
	}
	f := &gatedForwarder{addr: pc.LocalAddr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		pc.Close()
		ln.Close()
		up.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	forwardUDP(pc, up, f.open.Load, &wg)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(u, c); u.Close() }()
			go func() { defer wg.Done(); _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	return f
}

// forwardUDP relays datagrams between the one client that sends to pc
// and up until both are closed: those from the client only when pass
// says so (it is asked once for each). wg counts the two goroutines.
func forwardUDP(pc net.PacketConn, up *net.UDPConn, pass func() bool, wg *sync.WaitGroup) {
	var client atomic.Pointer[net.Addr]
	wg.Add(2)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			client.Store(&from)
			if pass() {
				_, _ = up.Write(buf[:n])
			}
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			n, err := up.Read(buf)
			if err != nil {
				return
			}
			if c := client.Load(); c != nil {
				_, _ = pc.WriteTo(buf[:n], *c)
			}
		}
	}()
}

func TestTCPGarbageClosedAndCounted(t *testing.T) {
	a := newMulti(t, Options{})
	for _, junk := range [][]byte{[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), bytes.Repeat([]byte{0x16, 0x03, 0x01, 0xff}, 300)} {
		c, err := net.Dial("tcp", a.TCPAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(junk)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.ReadAll(c)
		c.Close()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the listener kept a garbage connection open")
		}
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := a.Stats().TCPBadHandsake; n != 2 {
			return fmt.Errorf("TCPBadHandshake = %d, want 2", n)
		}
		return nil
	})
	// The listener still works.
	b := newMulti(t, Options{})
	if _, err := b.DialTCP(ctxT(t), a.Addr().String(), a.ID()); err != nil {
		t.Fatal(err)
	}
}

// relayLab is three endpoints: b and c are connected to the relay r
// (over QUIC) and not to each other.
type relayLab struct {
	r, b, c    *MultiEndpoint
	rb, rc     Conn // the relay's connections to b and c
	br, cr     Conn // b's and c's connections to the relay
	mu         sync.Mutex
	notWriters map[string]bool
}

// serveKinds hands c's streams of kind StreamRelay to e, as the node's
// Mux does.
func serveKinds(e *MultiEndpoint, c Conn) {
	go func() {
		for {
			s, err := c.AcceptStream(context.Background())
			if err != nil {
				return
			}
			go func() {
				var k [1]byte
				if _, err := io.ReadFull(s, k[:]); err != nil || k[0] != StreamRelay {
					s.Abort()
					return
				}
				e.ServeRelayStream(c, s)
			}()
		}
	}()
}

func newRelayLab(t *testing.T, relay RelayConfig) *relayLab { return newRelayLabTB(t, relay) }

func newRelayLabTB(t testing.TB, relay RelayConfig, tuneC ...func(*Config)) *relayLab {
	l := &relayLab{notWriters: map[string]bool{}}
	l.r = newMulti(t, Options{Relay: relay})
	l.b = newMulti(t, Options{})
	l.c = newMulti(t, Options{}, tuneC...)
	l.br, l.rb = quicPair(t, l.b, l.r)
	l.cr, l.rc = quicPair(t, l.c, l.r)
	conns := map[string]Conn{l.b.ID(): l.rb, l.c.ID(): l.rc}
	l.r.SetRelay(func(id string) bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return !l.notWriters[id]
	}, func(id string) (Conn, bool) { c, ok := conns[id]; return c, ok })
	serveKinds(l.r, l.rb)
	serveKinds(l.r, l.rc)
	serveKinds(l.c, l.cr)
	serveKinds(l.b, l.br)
	return l
}

// pair dials c from b through the relay and takes c's end: out is b's
// end of the relayed connection, in is c's.
func (l *relayLab) pair(tb testing.TB) (out, in Conn) {
	tb.Helper()
	out, err := l.b.DialRelay(ctxT(tb), l.br, l.c.ID())
	if err != nil {
		tb.Fatal(err)
	}
	in, err = l.c.Accept(ctxT(tb))
	if err != nil {
		tb.Fatal(err)
	}
	in.Admit() // as the peer layer does once the handshake is done
	return out, in
}

func TestRelayedConnEndToEnd(t *testing.T) {
	l := newRelayLab(t, RelayConfig{Rate: -1})
	out, in := l.pair(t)
	for _, c := range []Conn{in, out} {
		if p, via := PathOf(c); p != PathRelayed || via != l.r.ID() {
			t.Fatalf("path %q via %.8s", p, via)
		}
	}
	if in.PeerID() != l.b.ID() || out.PeerID() != l.c.ID() {
		t.Fatal("relayed ends do not see each other's keys")
	}
	exercise(t, out, in)
	exercise(t, in, out)
	st := l.r.Stats()
	if st.RelayServed != 1 || st.RelayActive != 1 || st.RelayBytes < 4_000_000 {
		t.Fatalf("relay stats %+v", st)
	}
	if l.b.Stats().RelayedOut != 1 || l.c.Stats().RelayedIn != 1 {
		t.Fatalf("ends' stats %+v %+v", l.b.Stats(), l.c.Stats())
	}
	out.Close("done")
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := l.r.Stats().RelayActive; n != 0 {
			return fmt.Errorf("relay still holds %d", n)
		}
		return nil
	})
}

// A relayed connection the target refuses at its pending-inbound cap is
// counted as a relayed one (relayedInRefused), not as a TCP connection
// refused (tcpRefused): the diagnostics said TCP was being flooded when
// it was the relayed path, on a node that may not even take TCP.
func TestRelayedRefusedAtPendingCapCountedAsRelayed(t *testing.T) {
	l := newRelayLabTB(t, RelayConfig{Rate: -1}, func(c *Config) { c.MaxPendingInbound = 1 })
	if _, err := l.b.DialRelay(ctxT(t), l.br, l.c.ID()); err != nil {
		t.Fatal(err)
	}
	in, err := l.c.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close("done") // not admitted: it holds c's one pending place
	if _, err := l.b.DialRelay(ctxT(t), l.br, l.c.ID()); !IsRelayRefusal(err, RelayRefused) {
		t.Fatalf("second relayed dial past the pending cap: %v, want the target's refusal", err)
	}
	st := l.c.Stats()
	if st.TCPRefused != 0 || st.RelayedInRefused != 1 || l.c.RefusedInbound() != 1 {
		t.Fatalf("tcpRefused %d, relayedInRefused %d, RefusedInbound %d; want 0, 1, 1", st.TCPRefused, st.RelayedInRefused, l.c.RefusedInbound())
	}
}

func TestRelayRefusesNonWriter(t *testing.T) {
	l := newRelayLab(t, RelayConfig{})
	l.mu.Lock()
	l.notWriters[l.b.ID()] = true
	l.mu.Unlock()
	_, err := l.b.DialRelay(ctxT(t), l.br, l.c.ID())
	if !IsRelayRefusal(err, RelayNotWriter) {
		t.Fatalf("non-writer: %v", err)
	}
	if n := l.r.Stats().RelayRefusedWriter; n != 1 {
		t.Fatalf("RelayRefusedWriter = %d", n)
	}
	other, _ := identity.Generate()
	l.mu.Lock()
	l.notWriters[l.b.ID()] = false
	l.mu.Unlock()
	if _, err := l.b.DialRelay(ctxT(t), l.br, other.ID()); !IsRelayRefusal(err, RelayNoTarget) {
		t.Fatalf("unknown target: %v", err)
	}
}

func TestRelayOff(t *testing.T) {
	l := newRelayLab(t, RelayConfig{Off: true})
	if _, err := l.b.DialRelay(ctxT(t), l.br, l.c.ID()); !IsRelayRefusal(err, RelayOff) {
		t.Fatalf("relay off: %v", err)
	}
}

// A relay joins only peers it reaches itself, the requester too: a
// request that came over a relayed connection would make a chain, each
// relayed pair costing two relays' budgets (and a writer could stack
// them further), so it is refused.
func TestRelayRefusesRequestOverRelayedConn(t *testing.T) {
	l := newRelayLab(t, RelayConfig{Rate: -1})
	out, in := l.pair(t) // b reaches c only through the lab's relay
	d := newMulti(t, Options{})
	cd, dc := quicPair(t, l.c, d)
	l.c.SetRelay(func(string) bool { return true }, func(id string) (Conn, bool) {
		if id == d.ID() {
			return cd, true
		}
		return nil, false
	})
	serveKinds(l.c, in)
	serveKinds(d, dc)
	if c2, err := l.b.DialRelay(ctxT(t), out, d.ID()); !IsRelayRefusal(err, RelayBad) {
		if err == nil {
			c2.Close("test over")
		}
		t.Fatalf("a request over a relayed connection: %v, want refused", err)
	}
	if n := l.c.Stats().RelayServed; n != 0 {
		t.Fatalf("RelayServed = %d", n)
	}
}

// A relay at its budget: a pair over the byte rate is slowed; a
// connection over the cap is refused; both are counted.
func TestRelayBudget(t *testing.T) {
	l := newRelayLab(t, RelayConfig{MaxConns: 1, Rate: 1 << 20})
	out, in := l.pair(t)
	if _, err := l.c.DialRelay(ctxT(t), l.cr, l.b.ID()); !IsRelayRefusal(err, RelayBusy) {
		t.Fatalf("over the cap: %v", err)
	}
	if n := l.r.Stats().RelayRefusedBusy; n != 1 {
		t.Fatalf("RelayRefusedBusy = %d", n)
	}
	go func() {
		s, err := in.AcceptStream(ctxT(t))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, s)
		s.Close()
	}()
	s, err := out.OpenStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(make([]byte, 2<<20)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := l.r.Stats().RelaySlowed; n == 0 {
			return errors.New("no copy was slowed")
		}
		return nil
	})
}

// tamperProxy forwards TCP connections to target and flips one byte in
// the client → server direction once flipAfter bytes went through.
func tamperProxy(t *testing.T, target string, flipAfter int) string {
	return testutil.ServeTCP(t, func(c net.Conn) {
		u, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		t.Cleanup(func() { c.Close(); u.Close() })
		back := make(chan struct{})
		go func() { _, _ = io.Copy(c, u); c.Close(); close(back) }()
		buf := make([]byte, 32<<10)
		seen := 0
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if seen <= flipAfter && seen+n > flipAfter {
					buf[flipAfter-seen] ^= 0x40
				}
				seen += n
				if _, err := u.Write(buf[:n]); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		u.Close()
		<-back // c stays open while u's answer is still on its way
	}).String()
}

// A man in the middle that changes one byte after the handshake makes
// the connection fail closed: the data it changed is never delivered.
func TestTamperedStreamPathFailsClosed(t *testing.T) {
	a := newMulti(t, Options{})
	b := newMulti(t, Options{})
	proxy := tamperProxy(t, a.TCPAddr().String(), 20_000)
	out, err := b.DialTCP(ctxT(t), proxy, a.ID())
	if err != nil {
		t.Fatal(err)
	}
	in, err := a.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte{'a'}, 100_000)
	got, _ := streamOnce(t, in, out, payload) // the write may fail: the path is tampered
	select {
	case b := <-got:
		if bytes.Equal(b, payload) || bytes.ContainsAny(b, "\x00!") || len(b) >= len(payload) {
			t.Fatalf("tampered stream delivered %d bytes", len(b))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("reader never ended")
	}
	for _, c := range []Conn{in, out} {
		select {
		case <-c.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("tampered connection still open")
		}
	}
}

func TestDrainWaitsForOpenStreams(t *testing.T) {
	a := newMulti(t, Options{})
	b := newMulti(t, Options{})
	out, in := tcpPair(t, b, a)
	s, err := out.OpenStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = s.Write([]byte("x"))
	r, err := in.AcceptStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if !Drain(out) {
		t.Fatal("a stream path must drain")
	}
	out.Close("moved")
	// The open stream still carries data both ways.
	if _, err := r.Write([]byte("still here")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "still here" {
		t.Fatalf("drained connection's stream: %v %q", err, buf)
	}
	s.Close()
	r.Close()
	testutil.Eventually(t, 5*time.Second, func() error {
		select {
		case <-out.Done():
			return nil
		default:
			return errors.New("drained connection not closed after its streams ended")
		}
	})
}

// benchStream moves b.N MiB from out to in on one stream (b.SetBytes).
func benchStream(b *testing.B, out, in Conn) {
	go func() {
		s, err := in.AcceptStream(context.Background())
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, s)
		s.Close()
	}()
	s, err := out.OpenStream(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	s.Close()
}

// Throughput of one stream over the TCP path and through a relay, on
// loopback: `go test -run x -bench Stream ./transport`.
func BenchmarkTCPStream(b *testing.B) {
	a := newMulti(b, Options{})
	c := newMulti(b, Options{})
	out, in := tcpPair(b, c, a)
	benchStream(b, out, in)
}

func BenchmarkRelayedStream(b *testing.B) {
	l := newRelayLabTB(b, RelayConfig{Rate: -1})
	out, in := l.pair(b)
	benchStream(b, out, in)
}
