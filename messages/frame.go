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
// the bytes arrive (readBody), so a peer that declares max and sends a
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
	b, err := readBody(r, int(n))
	if err != nil {
		return err
	}
	return Unmarshal(b, v)
}

// frameChunk is the first buffer of a frame's body; it doubles while the
// body keeps arriving, up to the declared length.
const frameChunk = 16 << 10

// readBody reads exactly n bytes into a buffer that grows with what has
// arrived.
func readBody(r io.Reader, n int) ([]byte, error) {
	b := make([]byte, 0, min(n, frameChunk))
	for {
		m, err := io.ReadFull(r, b[len(b):min(cap(b), n)])
		b = b[:len(b)+m]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if len(b) == n {
			return b, nil
		}
		b = slices.Grow(b, min(n-len(b), len(b)))
	}
}
