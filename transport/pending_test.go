package transport

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// isRefused reports whether err is quic-go's CONNECTION_REFUSED.
func isRefused(err error) bool {
	var te *quic.TransportError
	return errors.As(err, &te) && te.ErrorCode == quic.ConnectionRefused
}

// TestPendingInboundCapped floods an endpoint with simultaneous handshakes
// from fresh keys that the layer above never admits: beyond the cap they
// are refused at once and counted, a legitimate peer is refused too while
// the cap is full, and connects as soon as places are given back (by
// Admit or by the unknown peers going away).
func TestPendingInboundCapped(t *testing.T) {
	checkLeaks(t)
	const max, flood = 4, 16
	idA, _ := identity.Generate()
	logs := &testutil.LogBuffer{}
	// A refused client's late Initial packet can still open a handshake
	// once a place is free; nobody answers it, so it holds the place until
	// the handshake times out. Keep that short.
	a, err := Listen(Config{Identity: idA, ListenAddr: "127.0.0.1:0", MaxPendingInbound: max,
		HandshakeTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, _ := newTestEndpoint(t)

	type result struct {
		qc  *quic.Conn
		err error
	}
	results := make(chan result, flood)
	var wg sync.WaitGroup
	for range flood {
		wg.Go(func() {
			qc, err := dialUnknown(t, a)
			results <- result{qc, err}
		})
	}
	wg.Wait()
	close(results)
	var held []*quic.Conn
	for r := range results {
		switch {
		case r.err == nil:
			held = append(held, r.qc)
		case !isRefused(r.err):
			t.Fatalf("flood dial failed with %v, want CONNECTION_REFUSED", r.err)
		}
	}
	if len(held) != max {
		t.Fatalf("%d of %d unknown peers connected, want the cap %d", len(held), flood, max)
	}
	if got := a.RefusedInbound(); got != flood-max {
		t.Fatalf("RefusedInbound() = %d, want %d", got, flood-max)
	}
	if !strings.Contains(logs.String(), "too many are not admitted yet") {
		t.Fatalf("refusals not logged:\n%s", logs.String())
	}

	// The held connections reach Accept, but the layer above has not
	// admitted them: they keep their places, so a legitimate peer is
	// refused as well.
	var in []Conn
	for range max {
		c, err := a.Accept(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, c)
	}
	if _, err := b.Dial(ctxT(t), a.Addr().String(), a.ID()); !isRefused(err) {
		t.Fatalf("dial with the cap full = %v, want CONNECTION_REFUSED", err)
	}
	if got := a.RefusedInbound(); got != flood-max+1 {
		t.Fatalf("RefusedInbound() = %d, want %d", got, flood-max+1)
	}

	// Admitting one gives its place back (twice is harmless); the unknown
	// peers hanging up gives theirs back.
	in[0].Admit()
	in[0].Admit()
	var admitted *quic.Conn
	for _, qc := range held {
		// DialAddr binds the wildcard address: match the port.
		if qc.LocalAddr().(*net.UDPAddr).Port == in[0].RemoteAddr().(*net.UDPAddr).Port {
			admitted = qc
			continue
		}
		qc.CloseWithError(0, "bye")
	}
	if admitted == nil {
		t.Fatalf("no unknown peer dialed from %v", in[0].RemoteAddr())
	}
	// Places come back when the unknown peers' close arrives (and any
	// stray handshake times out): wait for all, then for the admissions
	// and the dial below, which must not take one.
	allFree := func(when string) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, testutil.Zero(a.pending.pending.Load, "places still taken "+when))
	}
	allFree("after the flood")
	out, err := b.Dial(ctxT(t), a.Addr().String(), a.ID())
	if err != nil {
		t.Fatalf("legitimate dial after the flood: %v", err)
	}
	got, err := a.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if got.PeerID() != b.ID() {
		t.Fatalf("accepted %.8s, want the legitimate peer %.8s", got.PeerID(), b.ID())
	}
	got.Admit()
	if err := out.Send(&messages.Envelope{Kind: messages.KindPing, Ping: &messages.Ping{SentUnixNano: 42}}); err != nil {
		t.Fatal(err)
	}
	if m, err := got.Recv(); err != nil || m.Ping.SentUnixNano != 42 {
		t.Fatalf("Recv = %+v, %v; want the ping 42", m, err)
	}
	allFree("after admitting the legitimate peer")
	// Dialed connections never take a place.
	bout, err := a.Dial(ctxT(t), b.Addr().String(), b.ID())
	if err != nil {
		t.Fatal(err)
	}
	allFree("with a dialed connection open")
	bout.Close("done")
	out.Close("done")
	admitted.CloseWithError(0, "bye")
}

// dialUnknown completes a QUIC handshake to e with a fresh key and opens
// the control stream; the connection closes at the end of the test.
func dialUnknown(t *testing.T, e *QUICEndpoint) (*quic.Conn, error) {
	id, err := identity.Generate()
	if err != nil {
		return nil, err
	}
	cert, err := selfSigned(id)
	if err != nil {
		return nil, err
	}
	qc, err := quic.DialAddr(ctxT(t), e.Addr().String(), clientTLS(cert, e.ID()), &quic.Config{})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	st, err := qc.OpenStreamSync(ctxT(t))
	if err != nil {
		return nil, err
	}
	if _, err := st.Write(preface); err != nil {
		return nil, err
	}
	return qc, nil
}

func TestPendingGateRetryUnderLoad(t *testing.T) {
	g := &pendingGate{max: 4, log: slog.Default()}
	for i, want := range []bool{false, false, true, true, true} {
		if got := g.verifySource(nil); got != want {
			t.Fatalf("verifySource with %d pending = %v, want %v", i, got, want)
		}
		g.pending.Add(1)
	}
}

// TestRefusalsCountedPerAttempt: the Initial packets of one refused
// client arrive one by one; they count as one attempt, and the memory of
// recent addresses stays bounded.
func TestRefusalsCountedPerAttempt(t *testing.T) {
	g := &pendingGate{max: 1, log: slog.New(slog.NewTextHandler(&testutil.LogBuffer{}, nil))}
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name string
		addr string
		at   time.Duration
		want bool
	}{
		{"first packet", "10.0.0.1:1", 0, true},
		{"second packet of the same flight", "10.0.0.1:1", 100 * time.Millisecond, false},
		{"another client", "10.0.0.2:1", 100 * time.Millisecond, true},
		{"same address, a later attempt", "10.0.0.1:1", 2 * time.Second, true},
	}
	for _, tt := range tests {
		if got := g.newAttempt(tt.addr, now.Add(tt.at)); got != tt.want {
			t.Fatalf("%s: newAttempt(%s, +%v) = %v, want %v", tt.name, tt.addr, tt.at, got, tt.want)
		}
	}
	for i := range 3 * maxRecentRefusals {
		g.newAttempt(fmt.Sprintf("10.1.%d.%d:1", i/256, i%256), now.Add(3*time.Second))
	}
	if n := len(g.recent); n > maxRecentRefusals {
		t.Fatalf("recent holds %d addresses, want at most %d", n, maxRecentRefusals)
	}
	g.refuse(&net.UDPAddr{IP: net.IPv4(10, 9, 9, 9), Port: 1})
	g.refuse(&net.UDPAddr{IP: net.IPv4(10, 9, 9, 9), Port: 1})
	if got := g.refused.Load(); got != 1 {
		t.Fatalf("refused = %d after two packets of one attempt, want 1", got)
	}
}
