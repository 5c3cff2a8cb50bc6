package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"peerdns/internal/identity"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

// logBuf collects log lines safely (internal/testutil).
type logBuf = testutil.LogBuffer

func newTestEndpoint(t testing.TB) (*QUICEndpoint, *logBuf) {
	t.Helper()
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	lb := &logBuf{}
	e, err := Listen(Config{Identity: id, ListenAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(lb, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, lb
}

func eventually(t testing.TB, within time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for err := cond(); err != nil; err = cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not true after %v: %v", within, err)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
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
		if got.Kind != messages.KindHello || got.Hello.ID != m.Hello.ID {
			t.Fatalf("Recv %d = %+v, want %+v", i, got, m)
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
			if m, err := in2.Recv(); err != nil || m.Kind != messages.KindPing {
				t.Fatalf("good peer after bad one: %v, %v", m, err)
			}
			out2.Close("done")
		})
	}
}

func TestClientWithoutCertificateRefused(t *testing.T) {
	a, _ := newTestEndpoint(t)
	id, _ := identity.Generate()
	cert, _ := selfSigned(id)
	tc := clientTLS(cert, a.ID())
	tc.Certificates = nil
	_, err := quic.DialAddr(ctxT(t), a.Addr().String(), tc, &quic.Config{})
	if err == nil {
		// TLS 1.3 clients finish before the server checks the certificate;
		// the refusal then arrives as a closed connection.
		t.Log("handshake completed client-side; server must not accept it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if c, err := a.Accept(ctx); err == nil {
		t.Fatalf("endpoint accepted a peer without certificate: %.8s", c.PeerID())
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
	buf := make([]byte, 32)
	n, _ := rs.Read(buf)
	if string(buf[:n]) != "tcp bytes" {
		t.Fatalf("stream read %q", buf[:n])
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	base := runtime.NumGoroutine()
	func() {
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
		a.Close()
		b.Close()
	}()
	eventually(t, 5*time.Second, func() error {
		if n := runtime.NumGoroutine(); n > base {
			return fmt.Errorf("%d goroutines still running", n-base)
		}
		return nil
	})
}
