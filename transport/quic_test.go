package transport

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// leakChecked holds the tests that already registered testutil.NoLeaks.
var leakChecked sync.Map

// checkLeaks registers testutil.NoLeaks once per test, before its first
// endpoint (so it runs after every endpoint's cleanup): whatever the
// test's endpoints and connections started must be gone by then.
func checkLeaks(t testing.TB) {
	if _, seen := leakChecked.LoadOrStore(t, true); seen {
		return
	}
	testutil.NoLeaks(t)
	t.Cleanup(func() { leakChecked.Delete(t) })
}

func newTestEndpoint(t testing.TB) (*QUICEndpoint, *testutil.LogBuffer) {
	t.Helper()
	checkLeaks(t)
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	lb := &testutil.LogBuffer{}
	e, err := Listen(Config{Identity: id, ListenAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(lb, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, lb
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// readOneStream accepts one stream on in and reads it to its end: the
// channel gets what came (nil if no stream did).
func readOneStream(t testing.TB, in Conn) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		s, err := in.AcceptStream(ctxT(t))
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(s)
		got <- b
	}()
	return got
}

// streamOnce sends payload over one stream from out to in: the returned
// channel gets what in read of it to its end (nil if no stream came), and
// the error is the write's or the close's, for the caller to judge (a
// tampered path may fail either).
func streamOnce(t testing.TB, in, out Conn, payload []byte) (<-chan []byte, error) {
	t.Helper()
	got := readOneStream(t, in)
	s, err := out.OpenStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(payload); err != nil {
		return got, err
	}
	return got, s.CloseWrite()
}

// connect dials b → a and returns both ends.
func connect(t testing.TB, a, b *QUICEndpoint) (inbound, outbound Conn) {
	t.Helper()
	out, err := b.Dial(ctxT(t), a.Addr().String(), a.ID())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	in, err := a.Accept(ctxT(t))
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	return in, out
}

func TestHandshakeAndControlStream(t *testing.T) {
	a, _ := newTestEndpoint(t)
	b, _ := newTestEndpoint(t)
	in, out := connect(t, a, b)
	if in.PeerID() != b.ID() || out.PeerID() != a.ID() {
		t.Fatalf("peer ids: inbound sees %.8s (want %.8s), outbound sees %.8s (want %.8s)", in.PeerID(), b.ID(), out.PeerID(), a.ID())
	}
	if in.Outbound() || !out.Outbound() {
		t.Fatalf("Outbound: inbound=%v outbound=%v", in.Outbound(), out.Outbound())
	}
	// The dialer's address as seen by the acceptor is its listening address.
	if in.RemoteAddr().String() != b.Addr().String() {
		t.Fatalf("inbound RemoteAddr = %v, want the dialer's listen address %v", in.RemoteAddr(), b.Addr())
	}
	for i, pair := range [][2]Conn{{out, in}, {in, out}} {
		m := &messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: pair[0].PeerID(), Network: "net"}}
		if err := pair[0].Send(m); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		got, err := pair[1].Recv()
		if err != nil {
			t.Fatalf("Recv %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("Recv %d = %+v, want %+v", i, got.Hello, m.Hello)
		}
	}
	out.Close("bye")
	select {
	case <-in.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("inbound side did not see the close")
	}
	if in.Err() == nil {
		t.Fatal("Err() = nil after close")
	}
}

func TestWrongPeerIDRefused(t *testing.T) {
	a, _ := newTestEndpoint(t)
	b, _ := newTestEndpoint(t)
	other, _ := identity.Generate()
	_, err := b.Dial(ctxT(t), a.Addr().String(), other.ID())
	if err == nil || !strings.Contains(err.Error(), ErrWrongPeer.Error()) {
		t.Fatalf("Dial with wrong expected id = %v, want %v", err, ErrWrongPeer)
	}
	// The endpoint keeps serving correct dials.
	connect(t, a, b)
}

func TestDialAnyKeyAndSelf(t *testing.T) {
	a, _ := newTestEndpoint(t)
	b, _ := newTestEndpoint(t)
	out, err := b.Dial(ctxT(t), a.Addr().String(), "")
	if err != nil {
		t.Fatal(err)
	}
	if out.PeerID() != a.ID() {
		t.Fatalf("PeerID = %.8s, want %.8s", out.PeerID(), a.ID())
	}
	if _, err := a.Dial(ctxT(t), a.Addr().String(), ""); !errors.Is(err, ErrSelf) {
		t.Fatalf("self dial = %v, want ErrSelf", err)
	}
	// Our own address passed on as another peer's: the dial says self,
	// not wrong peer, so the caller stops dialing it.
	if _, err := a.Dial(ctxT(t), a.Addr().String(), b.ID()); !errors.Is(err, ErrSelf) {
		t.Fatalf("self dial expecting another key = %v, want ErrSelf", err)
	}
}

// rawClient dials e with quic-go directly, so a test can send bytes the
// real Conn would never write.
func rawClient(t *testing.T, e *QUICEndpoint, withCert bool) (*quic.Conn, *quic.Stream) {
	t.Helper()
	id, _ := identity.Generate()
	cert, err := selfSigned(id)
	if err != nil {
		t.Fatal(err)
	}
	tc := clientTLS(cert, e.ID())
	if !withCert {
		tc.Certificates = nil
	}
	qc, err := quic.DialAddr(ctxT(t), e.Addr().String(), tc, &quic.Config{EnableDatagrams: true})
	if err != nil {
		return nil, nil
	}
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	st, err := qc.OpenStreamSync(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write(preface); err != nil {
		t.Fatal(err)
	}
	return qc, st
}

func TestBadFramesCloseConnEndpointKeepsServing(t *testing.T) {
	huge := []byte{0xff, 0xff, 0xff, 0xff}
	tests := []struct {
		name string
		send []byte
		code quic.ApplicationErrorCode
		log  string
	}{
		{"garbage", frame([]byte("this is not cbor at all")), CodeBadFrame, "bad frame"},
		{"invalid envelope", frame([]byte{0xa1, 0x01, 0x64, 'p', 'i', 'n', 'g'}), CodeBadFrame, "malformed peer message"},
		{"oversize", huge, CodeTooLarge, "frame too large"},
	}
	a, logs := newTestEndpoint(t)
	b, _ := newTestEndpoint(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			qc, st := rawClient(t, a, true)
			if _, err := st.Write(tt.send); err != nil {
				t.Fatal(err)
			}
			in, err := a.Accept(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := in.Recv(); err == nil {
				t.Fatal("Recv accepted a bad frame")
			}
			select {
			case <-qc.Context().Done():
			case <-time.After(5 * time.Second):
				t.Fatal("peer not disconnected")
			}
			var ae *quic.ApplicationError
			if err := context.Cause(qc.Context()); !errors.As(err, &ae) || ae.ErrorCode != tt.code {
				t.Fatalf("close cause = %v, want application error %#x", err, tt.code)
			}
			if !strings.Contains(logs.String(), tt.log) {
				t.Fatalf("log does not mention %q:\n%s", tt.log, logs.String())
			}
			// The endpoint still serves a good peer.
			in2, out2 := connect(t, a, b)
			if err := out2.Send(&messages.Envelope{Kind: messages.KindPing, Ping: &messages.Ping{SentUnixNano: 1}}); err != nil {
				t.Fatal(err)
			}
			if m, err := in2.Recv(); err != nil || m.Kind != messages.KindPing || m.Ping.SentUnixNano != 1 {
				t.Fatalf("good peer after bad one: Recv = %+v, %v; want the ping 1", m, err)
			}
			out2.Close("done")
		})
	}
}

func TestClientWithoutCertificateRefused(t *testing.T) {
	a, _ := newTestEndpoint(t)
	b, _ := newTestEndpoint(t)
	id, _ := identity.Generate()
	cert, _ := selfSigned(id)
	tc := clientTLS(cert, a.ID())
	tc.Certificates = nil
	qc, err := quic.DialAddr(ctxT(t), a.Addr().String(), tc, &quic.Config{})
	if err == nil {
		// A TLS 1.3 client can finish before the server has checked its
		// certificate; the refusal then arrives as the connection's close.
		t.Cleanup(func() { qc.CloseWithError(0, "") })
		select {
		case <-qc.Context().Done():
			err = context.Cause(qc.Context())
		case <-ctxT(t).Done():
			t.Fatal("a client without certificate is still connected")
		}
	}
	var te *quic.TransportError
	if !errors.As(err, &te) || !te.ErrorCode.IsCryptoError() {
		t.Fatalf("client without certificate ended with %v, want a TLS alert", err)
	}
	// The server sent that alert itself, so it can never hand this
	// connection up: the next one Accept returns is the good peer's.
	in, _ := connect(t, a, b)
	if in.PeerID() != b.ID() {
		t.Fatalf("Accept = %.8s, want the good peer %.8s", in.PeerID(), b.ID())
	}
}

func TestWrongALPNRefused(t *testing.T) {
	a, _ := newTestEndpoint(t)
	id, _ := identity.Generate()
	cert, _ := selfSigned(id)
	tc := clientTLS(cert, a.ID())
	tc.NextProtos = []string{"h3"}
	if _, err := quic.DialAddr(ctxT(t), a.Addr().String(), tc, &quic.Config{}); err == nil {
		t.Fatal("handshake with ALPN h3 succeeded")
	}
}

func TestDatagramsAndStreams(t *testing.T) {
	a, _ := newTestEndpoint(t)
	b, _ := newTestEndpoint(t)
	in, out := connect(t, a, b)
	// Datagrams are unreliable: resend until one arrives.
	got := make(chan []byte, 1)
	go func() {
		d, err := in.ReceiveDatagram(ctxT(t))
		if err == nil {
			got <- d
		}
	}()
	deadline := time.After(5 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		if err := out.SendDatagram([]byte("udp payload")); err != nil {
			t.Fatalf("SendDatagram: %v", err)
		}
		select {
		case d := <-got:
			if string(d) != "udp payload" {
				t.Fatalf("datagram = %q", d)
			}
			break loop
		case <-tick.C:
		case <-deadline:
			t.Fatal("no datagram arrived")
		}
	}
	// A tunnel-style stream beside the control stream.
	st, err := out.OpenStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte("tcp bytes")); err != nil {
		t.Fatal(err)
	}
	st.Close()
	rs, err := in.AcceptStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(rs); err != nil || string(got) != "tcp bytes" {
		t.Fatalf("stream read %q, %v; want %q", got, err, "tcp bytes")
	}
}

// Close stops every goroutine the endpoint and its connections started,
// with connections still open and one inbound connection never accepted.
func TestNoGoroutineLeak(t *testing.T) {
	checkLeaks(t)
	idA, _ := identity.Generate()
	idB, _ := identity.Generate()
	a, err := Listen(Config{Identity: idA, ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Listen(Config{Identity: idB, ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	connect(t, a, b)
	if _, err := b.Dial(ctxT(t), a.Addr().String(), a.ID()); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
}
