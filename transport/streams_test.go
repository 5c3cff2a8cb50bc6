package transport

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"peerdns/internal/testutil"
	"peerdns/transport/identity"
)

// newTunedEndpoint is newTestEndpoint with a Config the test adjusts.
func newTunedEndpoint(t testing.TB, tune func(*Config)) *QUICEndpoint {
	t.Helper()
	checkLeaks(t)
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Identity: id, ListenAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(&testutil.LogBuffer{}, nil))}
	tune(&cfg)
	e, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestConfigStreamAndWindowDefaults(t *testing.T) {
	var c Config
	c.defaults()
	if c.MaxIncomingStreams != DefaultMaxIncomingStreams || c.MaxStreamReceiveWindow != 16<<20 || c.MaxConnectionReceiveWindow != 64<<20 ||
		c.InitialStreamReceiveWindow != 512<<10 || c.InitialConnectionReceiveWindow != 1<<20 {
		t.Fatalf("defaults = streams %d, stream window %d..%d, connection window %d..%d", c.MaxIncomingStreams,
			c.InitialStreamReceiveWindow, c.MaxStreamReceiveWindow, c.InitialConnectionReceiveWindow, c.MaxConnectionReceiveWindow)
	}
	small := Config{MaxStreamReceiveWindow: 64 << 10, MaxConnectionReceiveWindow: 128 << 10}
	small.defaults()
	if small.InitialStreamReceiveWindow != 64<<10 || small.InitialConnectionReceiveWindow != 128<<10 {
		t.Fatalf("initial windows %d, %d not clamped to the maxima", small.InitialStreamReceiveWindow, small.InitialConnectionReceiveWindow)
	}
}

// openWithByte opens a stream and writes one byte so the peer sees it.
func openWithByte(t *testing.T, c Conn) Stream {
	t.Helper()
	s, err := c.OpenStream(ctxT(t))
	if err != nil {
		t.Fatalf("OpenStream: %v", err)
	}
	if _, err := s.Write([]byte{1}); err != nil {
		t.Fatalf("stream write: %v", err)
	}
	return s
}

func acceptWithByte(t *testing.T, c Conn) Stream {
	t.Helper()
	s, err := c.AcceptStream(ctxT(t))
	if err != nil {
		t.Fatalf("AcceptStream: %v", err)
	}
	var b [1]byte
	if _, err := io.ReadFull(s, b[:]); err != nil {
		t.Fatalf("stream read: %v", err)
	}
	return s
}

// At the cap the opener waits for credit; a stream that is finished both
// ways, or reset, gives its credit back.
func TestStreamCapWaitsForCredit(t *testing.T) {
	// The control stream takes one place: two are left for tunnels.
	a := newTunedEndpoint(t, func(c *Config) { c.MaxIncomingStreams = 3 })
	b := newTunedEndpoint(t, func(*Config) {})
	in, out := connect(t, a, b)

	s1, s2 := openWithByte(t, out), openWithByte(t, out)
	r1, r2 := acceptWithByte(t, in), acceptWithByte(t, in)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if s, err := out.OpenStream(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("OpenStream at the cap = %v, %v; want it to wait until the deadline", s, err)
	}

	// Finish stream 1 both ways: its credit comes back.
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(r1); err != nil {
		t.Fatalf("read to FIN: %v", err)
	}
	r1.Close()
	s3 := openWithByte(t, out)
	r3 := acceptWithByte(t, in)

	// Reset stream 2 from the accepting side: the opener sees the error
	// and the credit comes back too.
	ResetStream(r2)
	_ = s2.SetDeadline(time.Now().Add(10 * time.Second))
	_, err := io.ReadAll(s2)
	var se *quic.StreamError
	if !errors.As(err, &se) || se.ErrorCode != StreamRefused || !se.Remote {
		t.Fatalf("read of a reset stream = %v, want a remote StreamError %d", err, StreamRefused)
	}
	s4 := openWithByte(t, out)
	acceptWithByte(t, in)
	for _, s := range []Stream{s2, s3, s4, r3} {
		s.Close()
	}
}

func TestResetMemStream(t *testing.T) {
	a, b, _ := newMemPair(t)
	ctx := ctxT(t)
	out, err := a.Dial(ctx, b.Addr().String(), b.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close("done")
	s, err := out.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ResetStream(s)
	if _, err := s.Write([]byte{1}); err == nil {
		t.Fatal("write on a reset in-memory stream succeeded")
	}
}
