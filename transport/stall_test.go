package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/quic-go/quic-go"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// stallPair dials b from a on a fresh in-memory network whose frame
// timeout is d (0: the default) and returns the raw sender and the
// receiving Conn.
func stallPair(t *testing.T, d time.Duration) (out *memConn, in Conn) {
	t.Helper()
	n := NewMemNetwork()
	n.SetFrameTimeout(d)
	ia, _ := identity.Generate()
	ib, _ := identity.Generate()
	a, b := n.Listen(ia, slog.New(slog.NewTextHandler(&testutil.LogBuffer{}, nil))), n.Listen(ib, slog.New(slog.NewTextHandler(&testutil.LogBuffer{}, nil)))
	t.Cleanup(func() { a.Close(); b.Close() })
	c, err := a.Dial(context.Background(), b.Addr().String(), b.ID())
	if err != nil {
		t.Fatal(err)
	}
	in, err = b.Accept(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c.(*memConn), in
}

// prefix is a frame's length prefix declaring n payload bytes.
func prefix(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// A frame once begun must end within its deadline: a peer that sends a
// length prefix, part of one, or part of a body and then nothing while
// the connection stays up is disconnected with ErrFrameStalled at
// DefaultFrameTimeout plus the declared size's time at 64 kbit/s, counted
// from the frame's first byte. The time before a frame begins is not
// bounded. Runs on a fake clock, so the default bound is what is checked.
func TestStalledFrameClosesConn(t *testing.T) {
	tests := []struct {
		name string
		send []byte
		want time.Duration // from the first byte to the close
	}{
		{"one byte of the prefix", []byte{0}, DefaultFrameTimeout},
		{"prefix only", prefix(100), frameDeadline(DefaultFrameTimeout, 100)},
		{"part of a 1 MiB body", append(prefix(MaxFrameSize), make([]byte, 4096)...), DefaultFrameTimeout + 128*time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				out, in := stallPair(t, 0)
				// An idle hour before the frame begins costs nothing.
				time.Sleep(time.Hour)
				begun := time.Now()
				go func() { _ = out.WriteRaw(tt.send) }()
				_, err := in.Recv()
				if !errors.Is(err, ErrFrameStalled) {
					t.Fatalf("Recv = %v, want ErrFrameStalled", err)
				}
				if got := time.Since(begun); got != tt.want {
					t.Fatalf("stall noticed after %v, want %v", got, tt.want)
				}
				select {
				case <-out.Done():
				default:
					t.Fatal("the stalled connection is still open")
				}
				if err := out.Err(); err == nil || !strings.Contains(err.Error(), "frame stalled") {
					t.Fatalf("close reason = %v, want frame stalled", err)
				}
			})
		})
	}
}

// A big frame on a slow link is not a stall: 4096 tunnel ids (about
// 270 KiB, the most a peer announces) arriving at 6 KiB/s take well past
// DefaultFrameTimeout and are read whole, and the next frame, a minute
// later, gets its own deadline.
func TestSlowBigFrameIsRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out, in := stallPair(t, 0)
		ids := make([]string, messages.MaxTunnelIDs)
		for i := range ids {
			ids[i] = fmt.Sprintf("%064x", i)
		}
		b, err := EncodeFrame(&messages.Envelope{Kind: messages.KindTunnels, Tunnels: &messages.TunnelIDs{IDs: ids}})
		if err != nil {
			t.Fatal(err)
		}
		ping, _ := EncodeFrame(&messages.Envelope{Kind: messages.KindPing, Ping: &messages.Ping{SentUnixNano: 7}})
		defer out.Close("done")
		wait := func(d time.Duration) bool {
			select {
			case <-time.After(d):
				return true
			case <-out.Done():
				return false
			}
		}
		go func() {
			for len(b) > 0 {
				n := min(len(b), 6<<10)
				if out.WriteRaw(b[:n]) != nil {
					return
				}
				b = b[n:]
				if !wait(time.Second) { // the slow link
					return
				}
			}
			if wait(time.Minute) {
				_ = out.WriteRaw(ping)
			}
		}()
		start := time.Now()
		m, err := in.Recv()
		if err != nil {
			t.Fatalf("Recv of a slow big frame = %v", err)
		}
		if took := time.Since(start); took <= DefaultFrameTimeout+10*time.Second {
			t.Fatalf("the frame took %v, not past DefaultFrameTimeout: the test shows nothing", took)
		}
		if m.Kind != messages.KindTunnels || len(m.Tunnels.IDs) != len(ids) {
			t.Fatalf("got %s with %d ids", m.Kind, len(m.Tunnels.IDs))
		}
		if m, err := in.Recv(); err != nil || m.Kind != messages.KindPing {
			t.Fatalf("the frame after = %v, %v; want the ping", m, err)
		}
	})
}

// Over QUIC a peer that keeps its connection alive (keep-alives every
// 50 ms) but stops in the middle of a frame is closed with CodeStalled
// once FrameTimeout has passed.
func TestStalledFrameClosesQUIC(t *testing.T) {
	checkLeaks(t)
	id, _ := identity.Generate()
	lb := &testutil.LogBuffer{}
	const bound = 300 * time.Millisecond
	e, err := Listen(Config{Identity: id, ListenAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(lb, nil)), FrameTimeout: bound})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	cid, _ := identity.Generate()
	cert, err := selfSigned(cid)
	if err != nil {
		t.Fatal(err)
	}
	qc, err := quic.DialAddr(ctxT(t), e.Addr().String(), clientTLS(cert, e.ID()), &quic.Config{KeepAlivePeriod: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	st, err := qc.OpenStreamSync(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write(append(append([]byte(ControlPreface), prefix(100)...), "part"...)); err != nil {
		t.Fatal(err)
	}
	in, err := e.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := in.Recv(); !errors.Is(err, ErrFrameStalled) {
		t.Fatalf("Recv = %v, want ErrFrameStalled", err)
	}
	if took := time.Since(start); took < bound/2 {
		t.Fatalf("stall declared after %v, before the %v bound", took, bound)
	}
	select {
	case <-qc.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("peer not disconnected")
	}
	var ae *quic.ApplicationError
	if err := context.Cause(qc.Context()); !errors.As(err, &ae) || ae.ErrorCode != CodeStalled {
		t.Fatalf("close cause = %v, want application error %#x", err, CodeStalled)
	}
}

// A frame's declared length costs no memory before its bytes come: a
// peer that declares the largest frame, sends a few bytes of it and
// ends its stream makes the reader allocate about what came, not 1 MiB
// (a stalled one would hold that 1 MiB for its whole deadline).
func TestDeclaredFrameSizeNotAllocatedAhead(t *testing.T) {
	e, _ := newTestEndpoint(t)
	qc, st := rawClient(t, e, true)
	if qc == nil {
		t.Fatal("raw client did not connect")
	}
	if _, err := st.Write(append(prefix(MaxFrameSize), "part"...)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := e.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = in.Recv()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Recv = %v, want io.ErrUnexpectedEOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > MaxFrameSize/4 {
		t.Fatalf("reading 4 bytes of a frame declared %d bytes allocated %d bytes", MaxFrameSize, got)
	}
}

// On the TCP path (yamux streams) a peer stopped in the middle of a
// frame is closed the same way once FrameTimeout has passed.
func TestStalledFrameClosesTCPPath(t *testing.T) {
	checkLeaks(t)
	id, _ := identity.Generate()
	const bound = 300 * time.Millisecond
	a, err := ListenMulti(Config{Identity: id, ListenAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(&testutil.LogBuffer{}, nil)), FrameTimeout: bound}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b := newMulti(t, Options{})
	out, in := tcpPair(t, b, a)
	sc, ok := out.(*streamConn)
	if !ok {
		t.Fatalf("DialTCP gave a %T", out)
	}
	if _, err := sc.ctrl.Write(append(prefix(100), "part"...)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := in.Recv(); !errors.Is(err, ErrFrameStalled) {
		t.Fatalf("Recv = %v, want ErrFrameStalled", err)
	}
	if took := time.Since(start); took < bound/2 {
		t.Fatalf("stall declared after %v, before the %v bound", took, bound)
	}
	select {
	case <-out.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled peer's end stayed open")
	}
}

// slowReader hands out its bytes a few at a time and takes deadlines
// (none ever passes): the Conns' frame reader over it must read what
// ReadFrame reads.
type slowReader struct{ r io.Reader }

func (s slowReader) Read(b []byte) (int, error)      { return iotest.HalfReader(s.r).Read(b) }
func (s slowReader) SetReadDeadline(time.Time) error { return nil }

// FuzzFrameReaderMatchesReadFrame: on any byte stream, the frame reader
// every Conn uses (its first byte apart from the rest, deadlines set)
// yields the same frames, and stops at the same point, as ReadFrame.
func FuzzFrameReaderMatchesReadFrame(f *testing.F) {
	for _, tt := range frameCases(f) {
		f.Add(tt.in)
		f.Add(append(append([]byte{}, tt.in...), tt.in...))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want := bytes.NewReader(in)
		got := slowReader{bytes.NewReader(in)}
		var fr frameReader
		for i := 0; ; i++ {
			w, werr := ReadFrame(want, nil)
			g, gerr := fr.read(got)
			if (werr == nil) != (gerr == nil) || errors.Is(werr, ErrFrameTooLarge) != errors.Is(gerr, ErrFrameTooLarge) {
				t.Fatalf("frame %d: ReadFrame = %v, the Conns' reader = %v", i, werr, gerr)
			}
			if werr != nil {
				return
			}
			if !bytes.Equal(w, g) {
				t.Fatalf("frame %d: ReadFrame read %x, the Conns' reader %x", i, w, g)
			}
		}
	})
}
