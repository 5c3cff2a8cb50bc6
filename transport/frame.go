package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"peerdns/messages"
)

// MaxFrameSize is the largest control frame payload accepted or sent.
const MaxFrameSize = messages.MaxDecodeBytes

// frameHeader is the length prefix: 4 bytes, big-endian.
const frameHeader = 4

// ReadFrame reads one frame. buf is reused when it is large enough; the
// returned slice aliases it. A declared length over MaxFrameSize fails
// with ErrFrameTooLarge before anything is allocated.
func ReadFrame(r io.Reader, buf []byte) ([]byte, error) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > MaxFrameSize {
		return nil, fmt.Errorf("%w: %d bytes declared", ErrFrameTooLarge, n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
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

// frameReader is the receiving half every Conn shares: the read buffer
// kept between frames and the ops to skim (SkipHeld). Only the single
// Recv caller touches it.
type frameReader struct {
	buf  []byte
	held func(writer string, seq uint64) bool
}

// SkipHeld implements Conn.SkipHeld.
func (f *frameReader) SkipHeld(held func(writer string, seq uint64) bool) { f.held = held }

// next reads and decodes one frame from r. A frame the peer must not
// send (over MaxFrameSize, or one that does not decode) comes back as
// bad, and its Conn closes; err is any other failure to read (the
// stream ended).
func (f *frameReader) next(r io.Reader) (m *messages.Envelope, bad, err error) {
	b, err := ReadFrame(r, f.buf)
	if errors.Is(err, ErrFrameTooLarge) {
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
