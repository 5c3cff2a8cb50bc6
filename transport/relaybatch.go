package transport

import (
	"net"
	"sync"
	"time"
)

// Writes of a relayed connection are batched.
//
// A relayed connection is TLS and yamux over one QUIC stream to the
// relay. Left alone, every yamux frame header (12 bytes) becomes a TLS
// record of its own and every TLS record (at most 16 KiB) one Write on
// the QUIC stream, and a QUIC stream's Write returns only once quic-go's
// connection loop has taken the bytes into packets: one hand-off between
// goroutines per record, with the sender's yamux loop, its TLS
// encryption and QUIC's packing taking turns instead of overlapping.
// Through a relay the turns add up on both legs, and the tunnel ran at a
// fifth of the direct one's rate with every process mostly idle.
//
// batchConn puts a small buffer between TLS and the QUIC stream: Write
// appends to it and returns at once (it waits only while the buffer
// holds relayBatchMax bytes), and one goroutine per connection writes
// whatever has gathered to the stream in one call. So TLS encrypts the
// next records while QUIC packs the last ones, and the stream sees a few
// large writes instead of many small ones. The buffer is bounded (two
// slices of at most relayBatchMax that swap), so memory per relayed
// connection is flat however long it runs.
//
// Write errors are sticky: once the stream's Write fails, this and every
// later Write return the error (TLS then fails the connection). Write
// deadlines still bound the stream's Write, done by the flusher; a Write
// that waits for room ends when the flusher fails or the conn closes.

// relayBatchMax is the most a batchConn buffers before Write waits: a few
// TLS records, enough to keep QUIC's packer busy while the next ones are
// encrypted, small against QUIC's stream window.
const relayBatchMax = 256 << 10

type batchConn struct {
	net.Conn
	max int // relayBatchMax unless set

	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte // waiting to be written
	spare   []byte // the flusher's last slice, reused
	writing bool   // the flusher holds a slice
	err     error
	closed  bool
}

func newBatchConn(c net.Conn) *batchConn { return newBatchConnMax(c, relayBatchMax) }

func newBatchConnMax(c net.Conn, max int) *batchConn {
	b := &batchConn{Conn: c, max: max}
	b.cond = sync.NewCond(&b.mu)
	go b.flush()
	return b
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for len(p) > 0 {
		for b.err == nil && !b.closed && len(b.buf) >= b.max {
			b.cond.Wait()
		}
		if b.err != nil {
			return n, b.err
		}
		if b.closed {
			return n, net.ErrClosed
		}
		k := min(len(p), b.max-len(b.buf))
		b.buf = append(b.buf, p[:k]...)
		p = p[k:]
		n += k
		b.cond.Broadcast()
	}
	return n, nil
}

// flush writes what Write gathered to the stream until it fails or the
// conn closes.
func (b *batchConn) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for len(b.buf) == 0 && !b.closed && b.err == nil {
			b.cond.Wait()
		}
		if b.closed || b.err != nil {
			return
		}
		out := b.buf
		b.buf, b.spare = b.spare[:0], nil
		b.writing = true
		b.cond.Broadcast() // room for writers
		b.mu.Unlock()
		_, err := b.Conn.Write(out)
		b.mu.Lock()
		b.writing = false
		b.spare = out[:0]
		if err != nil && b.err == nil {
			b.err = err
		}
		b.cond.Broadcast()
	}
}

// drain waits until everything written so far is on the stream (or the
// stream failed, or the conn closed) and returns the sticky error.
func (b *batchConn) drain() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.err == nil && !b.closed && (len(b.buf) > 0 || b.writing) {
		b.cond.Wait()
	}
	if b.err == nil && b.closed {
		return net.ErrClosed
	}
	return b.err
}

// Close ends the flusher and closes the conn; what was not written yet is
// dropped (closing a relayed connection aborts its stream anyway).
func (b *batchConn) Close() error {
	b.stop()
	return b.Conn.Close()
}

// stop ends the flusher (after its current write) and leaves the conn
// open; what was not written yet is dropped.
func (b *batchConn) stop() {
	b.mu.Lock()
	b.closed = true
	b.cond.Broadcast()
	b.mu.Unlock()
}

// SetDeadline and SetWriteDeadline reach the stream, so they bound the
// flusher's write.
func (b *batchConn) SetDeadline(t time.Time) error      { return b.Conn.SetDeadline(t) }
func (b *batchConn) SetWriteDeadline(t time.Time) error { return b.Conn.SetWriteDeadline(t) }
