package transport

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport/identity"
)

func newMemPair(t *testing.T) (*MemEndpoint, *MemEndpoint, *testutil.LogBuffer) {
	t.Helper()
	checkLeaks(t)
	n := NewMemNetwork()
	ia, _ := identity.Generate()
	ib, _ := identity.Generate()
	lb := &testutil.LogBuffer{}
	a := n.Listen(ia, slog.New(slog.NewTextHandler(lb, nil)))
	b := n.Listen(ib, nil)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b, lb
}

func TestMemConnContract(t *testing.T) {
	a, b, logs := newMemPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	other, _ := identity.Generate()
	if _, err := b.Dial(ctx, a.Addr().String(), other.ID()); !errors.Is(err, ErrWrongPeer) {
		t.Fatalf("wrong id dial = %v", err)
	}
	if _, err := a.Dial(ctx, a.Addr().String(), ""); !errors.Is(err, ErrSelf) {
		t.Fatalf("self dial = %v", err)
	}
	out, err := b.Dial(ctx, a.Addr().String(), a.ID())
	if err != nil {
		t.Fatal(err)
	}
	in, err := a.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if in.PeerID() != b.ID() || out.PeerID() != a.ID() || in.Outbound() || !out.Outbound() {
		t.Fatal("ids or directions wrong")
	}
	go out.Send(&messages.Envelope{Kind: messages.KindPing, Ping: &messages.Ping{SentUnixNano: 7}})
	if m, err := in.Recv(); err != nil || m.Ping.SentUnixNano != 7 {
		t.Fatalf("Recv = %v, %v", m, err)
	}
	// Streams and datagrams.
	go func() {
		s, err := out.OpenStream(ctx)
		if err == nil {
			s.Write([]byte("hi"))
			s.Close()
		}
	}()
	s, err := in.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(s); string(b) != "hi" {
		t.Fatalf("stream read %q", b)
	}
	out.SendDatagram([]byte("dg"))
	if d, err := in.ReceiveDatagram(ctx); err != nil || string(d) != "dg" {
		t.Fatalf("datagram = %q, %v", d, err)
	}
	// Garbage closes both ends and is logged.
	go out.(*memConn).WriteRaw(frame([]byte("junk")))
	if _, err := in.Recv(); err == nil {
		t.Fatal("garbage accepted")
	}
	select {
	case <-out.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("sender not disconnected")
	}
	if !strings.Contains(logs.String(), "bad frame") {
		t.Fatalf("no log line: %s", logs.String())
	}
	if out.Err() == nil {
		t.Fatal("Err() nil after close")
	}
}

func TestMemMeterCountsFrames(t *testing.T) {
	a, b, _ := newMemPair(t)
	type rec struct {
		from, to, kind string
		bytes          int
	}
	got := make(chan rec, 4)
	a.net.SetMeter(func(from, to, kind string, n int) { got <- rec{from, to, kind, n} })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := b.Dial(ctx, a.Addr().String(), a.ID())
	if err != nil {
		t.Fatal(err)
	}
	in, err := a.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env := &messages.Envelope{Kind: messages.KindPing, Ping: &messages.Ping{SentUnixNano: 7}}
	payload, err := EncodeEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	go out.Send(env)
	if _, err := in.Recv(); err != nil {
		t.Fatal(err)
	}
	want := rec{b.ID(), a.ID(), messages.KindPing, frameHeader + len(payload)}
	if r := <-got; r != want {
		t.Fatalf("meter saw %+v, want %+v", r, want)
	}
	a.net.SetMeter(nil)
	go out.Send(env)
	if _, err := in.Recv(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		t.Fatalf("removed meter still called: %+v", r)
	default:
	}
}
