package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"peerdns/messages"
)

// MaxFrameSize is the largest control frame payload accepted or sent.
const MaxFrameSize = messages.MaxDecodeBytes

// frameHeader is the length prefix: 4 bytes, big-endian.
const frameHeader = 4

// ReadFrame reads one frame. buf is reused when it is large enough; the
// returned slice aliases it. A declared length over MaxFrameSize fails
// with ErrFrameTooLarge before anything is allocated; a buffer for one
// within it grows as its bytes come (messages.ReadBody).
func ReadFrame(r io.Reader, buf []byte) ([]byte, error) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > MaxFrameSize {
		return nil, fmt.Errorf("%w: %d bytes declared", ErrFrameTooLarge, n)
	}
	buf, err := messages.ReadBody(r, buf, int(n))
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("frame body: %w", err)
	}
	return buf, nil
}

// EncodeFrame validates and encodes m as a whole frame, its length
// prefix and payload in one buffer, to go out in one Write (so
// concurrent writers serialised by a lock never interleave). The
// payload is encoded in place after the prefix: encoding it apart and
// copying it behind a prefix cost every frame sent a second buffer.
func EncodeFrame(m *messages.Envelope) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b, err := messages.AppendEnvelope(make([]byte, frameHeader), m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.Kind, err)
	}
	n := len(b) - frameHeader
	if n > MaxFrameSize {
		return nil, fmt.Errorf("%w: %s message is %d bytes", ErrFrameTooLarge, m.Kind, n)
	}
	binary.BigEndian.PutUint32(b, uint32(n))
	return b, nil
}

// EncodeEnvelope validates and encodes m as a frame payload.
func EncodeEnvelope(m *messages.Envelope) ([]byte, error) {
	b, err := EncodeFrame(m)
	if err != nil {
		return nil, err
	}
	return b[frameHeader:], nil
}

// DecodeEnvelope decodes and validates a frame payload (strict CBOR).
func DecodeEnvelope(b []byte) (*messages.Envelope, error) { return decodeEnvelope(b, nil) }

// maxKeptReadBuf bounds the read buffer a connection keeps between frames,
// so one large frame does not pin 1 MiB per peer.
const maxKeptReadBuf = 64 << 10

// DefaultFrameTimeout is the least time a control frame has from its
// first byte to its last (Config.FrameTimeout).
//
// A frame once begun must end: a peer that sends a length prefix, or part
// of a body, and then nothing keeps its connection alive (QUIC and yamux
// keep-alives are not ours to send), and the reader would wait for the
// rest for ever while the peer holds its session and view slot. How long
// is generous: an honest sender writes a frame in one Write bounded by its
// WriteTimeout (10 s by default; it closes the connection itself past
// that), so 30 s is three times what a default peer ever takes to put a
// frame on the wire. A peer with a longer write timeout on a slow link is
// covered by the size allowance on top: frameRate per second of the
// declared length, the speed of a 64 kbit/s link, so the largest frame
// (1 MiB) has 30 s + 128 s. Time spent before a frame's first byte is not
// bounded here: a peer with nothing to say is the session's to judge
// (its pings, actors/peer).
const DefaultFrameTimeout = 30 * time.Second

// frameRate is the slowest link a frame's size allowance is made for, in
// bytes per second (64 kbit/s).
const frameRate = 8 << 10

// frameDeadline is how long a frame of n payload bytes may take from its
// first byte, given the least time base.
func frameDeadline(base time.Duration, n uint32) time.Duration {
	return base + time.Duration(n)*time.Second/frameRate
}

// deadlineReader is a control stream: every Conn's can bound a read.
type deadlineReader interface {
	io.Reader
	SetReadDeadline(t time.Time) error
}

// frameReader is the receiving half every Conn shares: the read buffer
// kept between frames, the ops to skim (SkipHeld) and the bound on a
// frame's time (DefaultFrameTimeout). Only the single Recv caller
// touches it.
type frameReader struct {
	buf  []byte
	held func(writer string, seq uint64) bool
	// timeout is the least time a frame has once begun (0: the default).
	timeout time.Duration
}

// SkipHeld implements Conn.SkipHeld.
func (f *frameReader) SkipHeld(held func(writer string, seq uint64) bool) { f.held = held }

// next reads and decodes one frame from r. A frame the peer must not
// send (over MaxFrameSize, one that does not decode, or one not finished
// within its deadline: ErrFrameStalled) comes back as bad, and its Conn
// closes; err is any other failure to read (the stream ended).
func (f *frameReader) next(r deadlineReader) (m *messages.Envelope, bad, err error) {
	b, err := f.read(r)
	if errors.Is(err, ErrFrameTooLarge) || errors.Is(err, ErrFrameStalled) {
		return nil, err, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if cap(b) <= maxKeptReadBuf {
		f.buf = b[:0]
	}
	// The decoder copies byte strings out of b, so reusing b is safe.
	if m, err = decodeEnvelope(b, f.held); err != nil {
		return nil, err, nil
	}
	return m, nil, nil
}

// read is ReadFrame with the frame's deadline: the wait for its first
// byte is unbounded, the rest must come within frameDeadline of it.
func (f *frameReader) read(r deadlineReader) ([]byte, error) {
	var h [frameHeader]byte
	got, err := 0, error(nil)
	for got == 0 && err == nil {
		got, err = r.Read(h[:])
	}
	if got == 0 {
		return nil, err
	}
	base := f.timeout
	if base <= 0 {
		base = DefaultFrameTimeout
	}
	begun := time.Now()
	_ = r.SetReadDeadline(begun.Add(frameDeadline(base, 0)))
	defer func() { _ = r.SetReadDeadline(time.Time{}) }()
	if _, err := io.ReadFull(r, h[got:]); err != nil {
		return nil, stalled(err, begun, "length prefix")
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > MaxFrameSize {
		return nil, fmt.Errorf("%w: %d bytes declared", ErrFrameTooLarge, n)
	}
	_ = r.SetReadDeadline(begun.Add(frameDeadline(base, n)))
	buf, err := messages.ReadBody(r, f.buf, int(n))
	if err != nil {
		return nil, stalled(err, begun, fmt.Sprintf("%d-byte body", n))
	}
	return buf, nil
}

// stalled turns a read of a begun frame that hit its deadline into
// ErrFrameStalled; an end of the stream mid-frame is io.ErrUnexpectedEOF.
func stalled(err error, begun time.Time, part string) error {
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("%w: %s unfinished after %v", ErrFrameStalled, part, time.Since(begun).Round(time.Millisecond))
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("frame %s: %w", part, err)
}

// decodeEnvelope is DecodeEnvelope with the ops held skimmed
// (Conn.SkipHeld).
func decodeEnvelope(b []byte, held func(writer string, seq uint64) bool) (*messages.Envelope, error) {
	m, err := messages.UnmarshalEnvelopeHeld(b, held)
	if err != nil {
		return nil, fmt.Errorf("decode frame: %w", err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// ReadEnvelope reads and decodes one frame.
func ReadEnvelope(r io.Reader, buf []byte) (*messages.Envelope, error) {
	b, err := ReadFrame(r, buf)
	if err != nil {
		return nil, err
	}
	return DecodeEnvelope(b)
}

// frameFault names what was wrong with a frame that closes its
// connection, for the log line and the close reason.
func frameFault(bad error) string {
	switch {
	case errors.Is(bad, ErrFrameTooLarge):
		return "frame too large"
	case errors.Is(bad, ErrFrameStalled):
		return "frame stalled"
	}
	return "bad frame"
}
