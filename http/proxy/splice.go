package proxy

import (
	"io"
	"net"
)

// An answer's body from an upstream on this machine to a plain HTTP
// client, moved by the kernel (splice(2), through a pipe) instead of
// read into the edge and written out again.
//
// When the upstream connection is a TCP socket (a tunnel to a service on
// this node: actors/tunnel's local connections, tcpSource) and the
// client's connection a plain TCP one, a streamed body of declared length
// (poolBody) is written as it always is up to what came with the head
// (the held head goes out with it, headhold.go), and the rest goes from
// socket to socket in the kernel: Go's TCPConn.ReadFrom splices when it
// reads from a TCP connection. On loopback the pages the upstream sent
// are passed on without being copied; read and written, a 64 KiB answer
// was copied twice by the edge (the kernel's copies into and out of its
// buffer were a sixth of the node's CPU on the same-node route).
// Measured there, 64 KiB answers, both binaries in one interleaved run
// (bench/README.md): 25,396 → 28,379 req/s at 31.3 → 22.5 µs of the
// node's CPU a request, nginx's proxy beside them 27,909 at 34.3.
//
// Moved in pieces of at most spliceChunk, the deadlines moved before
// each as Write and Read move them (timeouts.go), so a slow client or
// upstream is held to the same timeouts as when the body is copied
// (ReadFrom's 64 KiB buffer: one write of it blocks just as long).
//
// At most spliceSlots pieces move at once; a piece that finds none free
// is copied, with the rest of its body, as before. Why: Go's splice takes
// a pipe from a pool of its own for each piece and asks the kernel for a
// 1 MiB buffer on it, and Linux counts pipe buffers per user: past
// /proc/sys/fs/pipe-user-pages-soft (16,384 pages, 64 pipes of 1 MiB)
// an unprivileged user's new pipes get two pages, and a 64 KiB piece
// would take eight splices each way instead of one read and one write.
// 32 pipes keep the node at half that limit, leaving the rest to the
// user's other processes; on a machine with many cores, pieces are short
// (a 64 KiB piece is a few microseconds in the kernel), so 32 at once
// are not what bounds the edge, and a slow client holds one only while
// its piece waits for it.
//
// Not spliced: HTTPS clients (TLS is written in the process), HTTP/2 and
// HTTP/3 clients, upstreams in TLS or through a peer's tunnel (QUIC),
// bodies chunked or read until close (their framing is the edge's to
// read).
const spliceChunk = 64 << 10

// spliceSlots holds a token for each piece being spliced (above).
var spliceSlots = make(chan struct{}, 32)

// tcpSource is an upstream connection over a TCP socket of this machine
// that lets the edge move what it would read with splice: TCPConn is the
// socket (nil: none), CountRead is told what was moved past Read.
type tcpSource interface {
	TCPConn() *net.TCPConn
	CountRead(n int64)
}

// splice moves the rest of pb to c as above; done false: it cannot, or
// no slot was free (the caller copies the rest as usual, after the n
// bytes moved).
func (c *movingDeadlines) splice(pb *poolBody) (n int64, done bool, err error) {
	dst, ok := c.Conn.(*net.TCPConn)
	if !ok || pb.kind != bodySized || c.gathered.Load() != nil {
		return 0, false, nil
	}
	up, ok := pb.conn.(*movingDeadlines)
	if !ok {
		return 0, false, nil
	}
	var src *net.TCPConn
	ts, _ := up.Conn.(tcpSource)
	if ts != nil {
		src = ts.TCPConn()
	} else {
		src, _ = up.Conn.(*net.TCPConn)
	}
	if src == nil {
		return 0, false, nil
	}
	defer func() {
		if err != nil {
			pb.failed = true
		}
	}()
	// What came with the head, written with the head held for it; or the
	// head alone, before the socket takes over.
	if k := min(pb.br.Buffered(), int(pb.lr.N)); k > 0 {
		b, _ := pb.br.Peek(k)
		m, err := c.Write(b)
		_, _ = pb.br.Discard(m)
		pb.lr.N -= int64(m)
		n += int64(m)
		if err != nil {
			return n, true, err
		}
	} else if err := c.flushHeld(); err != nil {
		return 0, true, err
	}
	for pb.lr.N > 0 {
		select {
		case spliceSlots <- struct{}{}:
		default:
			return n, false, nil
		}
		if err := c.moveWrite(); err != nil {
			<-spliceSlots
			return n, true, err
		}
		if err := up.moveRead(); err != nil {
			<-spliceSlots
			return n, true, err
		}
		pb.chunk = io.LimitedReader{R: src, N: min(pb.lr.N, spliceChunk)}
		m, err := dst.ReadFrom(&pb.chunk)
		pb.chunk.R = nil
		if ts != nil && m > 0 {
			ts.CountRead(m)
		}
		<-spliceSlots // after the count: no slot taken, nothing left to count
		pb.lr.N -= m
		n += m
		switch {
		case err != nil:
			return n, true, err
		case m == 0:
			return n, true, io.ErrUnexpectedEOF // the upstream closed short of the declared length
		}
	}
	pb.end = true
	return n, true, nil
}
