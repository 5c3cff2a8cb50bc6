package messages

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// ErrFrameTooLarge reports a stream frame over the caller's limit.
var ErrFrameTooLarge = errors.New("frame too large")

// WriteFrame writes v as one stream frame: a 4-byte big-endian length and
// the CBOR, in one Write. A frame over max bytes is not written.
func WriteFrame(w io.Writer, v any, max int) error {
	b, err := Marshal(v)
	if err != nil {
		return err
	}
	return WriteFrameBytes(w, b, max)
}

// WriteFrameBytes writes b, an already encoded message, as one frame: for
// a writer that needed the encoding first (its size, say).
func WriteFrameBytes(w io.Writer, b []byte, max int) error {
	if len(b) > max {
		return fmt.Errorf("%w: %d bytes (limit %d)", ErrFrameTooLarge, len(b), max)
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err := w.Write(buf)
	return err
}

// ReadFrame reads one frame into v (strict CBOR). A declared length over
// max fails before anything is allocated; within it, memory is taken as
// the bytes arrive (ReadBody), so a peer that declares max and sends a
// few bytes holds a few kilobytes of ours, not max.
func ReadFrame(r io.Reader, v any, max int) error {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > uint32(max) {
		return fmt.Errorf("%w: %d bytes declared (limit %d)", ErrFrameTooLarge, n, max)
	}
	b, err := ReadBody(r, nil, int(n))
	if err != nil {
		return err
	}
	return Unmarshal(b, v)
}

// BodyChunk is the most of a frame's body allocated ahead of its bytes.
const BodyChunk = 64 << 10

// ReadBody reads a frame's body of n bytes (its length already read and
// checked against the caller's limit): into buf when it is large enough
// (the returned slice aliases it), else into a buffer that starts at
// BodyChunk and doubles as the bytes come, so a declared length costs no
// memory before the peer sends it (a peer that declares 1 MiB and stalls
// holds 64 KiB of ours). A body over BodyChunk costs a few more
// allocations and copies, at most its size again. An end before n bytes
// is io.ErrUnexpectedEOF.
func ReadBody(r io.Reader, buf []byte, n int) ([]byte, error) {
	if cap(buf) >= n {
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, unexpected(err)
		}
		return buf, nil
	}
	b := make([]byte, 0, min(n, BodyChunk))
	for {
		m, err := io.ReadFull(r, b[len(b):min(cap(b), n)])
		b = b[:len(b)+m]
		if err != nil {
			return nil, unexpected(err)
		}
		if len(b) == n {
			return b, nil
		}
		b = slices.Grow(b, min(n-len(b), len(b)))
	}
}

// unexpected is err, with io.EOF as io.ErrUnexpectedEOF: a body that
// ends early.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
