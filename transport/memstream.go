package transport

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// ErrStreamReset is what an in-memory stream's reads and writes fail with
// once the peer aborted it (QUIC reports a remote StreamError instead).
var ErrStreamReset = errors.New("stream reset by peer")

// memStream is one end of an in-memory stream. Each direction is a
// net.Pipe of its own, used one way only, so one direction can end (our
// write end closed: the peer reads io.EOF) while the other keeps flowing:
// a net.Pipe alone cannot half-close. Deadlines apply to both pipes.
type memStream struct {
	w   net.Conn     // we write here; the peer reads the other end
	r   net.Conn     // we read here; the peer writes the other end
	out *atomic.Bool // set when we aborted: the peer's io.EOF is a reset
	in  *atomic.Bool // set when the peer aborted
}

var _ Stream = (*memStream)(nil)

// newMemStreamPair returns the two ends of a new stream.
func newMemStreamPair() (a, b *memStream) {
	abW, abR := net.Pipe() // a → b
	baW, baR := net.Pipe() // b → a
	aReset, bReset := new(atomic.Bool), new(atomic.Bool)
	a = &memStream{w: abW, r: baR, out: aReset, in: bReset}
	b = &memStream{w: baW, r: abR, out: bReset, in: aReset}
	return a, b
}

func (s *memStream) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err == io.EOF && s.in.Load() {
		err = ErrStreamReset
	}
	return n, err
}

func (s *memStream) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil && s.in.Load() {
		err = ErrStreamReset
	}
	return n, err
}

// CloseWrite ends our direction: the peer reads io.EOF, we keep reading.
func (s *memStream) CloseWrite() error {
	_ = s.w.Close()
	return nil
}

// Close ends both directions: the peer reads io.EOF and its writes fail.
func (s *memStream) Close() error {
	_ = s.w.Close()
	_ = s.r.Close()
	return nil
}

// Abort ends both directions as a failure: the peer's reads and writes
// fail with ErrStreamReset.
func (s *memStream) Abort() {
	s.out.Store(true) // before the closes, so the peer never sees a clean EOF
	_ = s.w.Close()
	_ = s.r.Close()
}

func (s *memStream) SetReadDeadline(t time.Time) error  { return s.r.SetReadDeadline(t) }
func (s *memStream) SetWriteDeadline(t time.Time) error { return s.w.SetWriteDeadline(t) }

func (s *memStream) SetDeadline(t time.Time) error {
	if err := s.w.SetWriteDeadline(t); err != nil {
		return err
	}
	return s.r.SetReadDeadline(t)
}
