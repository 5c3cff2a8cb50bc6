package proxy

import (
	"net"
	"runtime"
	"sync"
	"time"
)

// Gathered writes on HTTP/2 client connections, above TLS.
//
// net/http's HTTP/2 server flushes its frame buffer to the connection
// whenever its queue of frames to write runs empty, and a response is at
// least two frames, HEADERS and DATA, the second handed over by the
// handler only once the first is written: with nothing else queued in
// between, the server flushes after each, about twice per 100 B response
// under h2load (8 connections, 10 streams each). On a *tls.Conn each
// flush is a TLS record, sealed on a goroutine the server starts for the
// flush (its stack grown in TLS's Write), and a write system call.
//
// The server is therefore handed each connection that negotiated h2 as a
// gatheredConn over its *tls.Conn: Write appends the plaintext to a
// pending buffer and returns, and a goroutine started for the purpose
// hands what is pending to TLS in one Write after letting every
// goroutine ready to run at that moment run first (runtime.Gosched): the
// handlers whose frames the server is about to write, the server's own
// loop. TLS's records of that Write (up to 16 KiB each, far smaller
// early in a connection) leave in one system call (the connection under
// TLS batches them: movingDeadlines.batchWrites). On one P (the node's
// usual state, internal/procs) that is one TLS Write and one system call
// per connection per round of the scheduler, however many streams
// answered in it, and the server's flush is an append. BenchmarkH2Load,
// per 100 B response: the server's flushes 1.96, TLS Writes and system
// calls 0.11 (they were 1.95 TLS records for 0.2 system calls with the
// writes gathered under TLS); per 64 KiB response 6.9 flushes, 0.55 TLS
// Writes and system calls (without the batching under TLS, 4 system
// calls more: one per record). A lone response waits only for the
// goroutines already ready, a few microseconds. With many Ps (a 16-core
// machine with the governor at Max) the flush goroutine may run at once
// on another P and gather less; it then costs a goroutine start per
// TLS Write, which the server's own flush would have made anyway.
//
// What a write means is otherwise unchanged, as a kernel socket buffer
// makes it: Write returns before the bytes leave, an error of the write
// (a reset, the moving write deadline of the connection under TLS: a
// client that reads nothing for WriteTimeout) is returned by the next
// Write and closes the connection at once (net/http's reader ends), and
// at most gatherMax bytes wait: a writer past it waits for the write, as
// it would for a full socket buffer. Close hands what is pending to TLS
// still (a GOAWAY), then closes the TLS connection (its close_notify),
// within the same write deadline; reads fail from Close on.
type gatheredConn struct {
	net.Conn // a *tls.Conn in the edge; its ConnectionState is hidden (h2.go)
	under    *movingDeadlines

	mu      sync.Mutex
	room    sync.Cond // a writer waits for the pending bytes to go under gatherMax; waitIdle for the flush goroutine to end
	pending *[]byte   // from gatherBufs; nil when nothing is pending
	err     error     // the write's error, or net.ErrClosed after Close
	running bool      // a flush goroutine runs
	closed  bool      // Close was called; the flush goroutine closes the connection
}

// gatherMax bounds the bytes a connection holds pending (a client that
// reads nothing holds that much of the node's memory until the write
// deadline, beside what TLS and the kernel's socket buffer hold): eight
// 16 KiB frames, two 64 KiB answers in one write.
const gatherMax = 128 << 10

var gatherBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// gather wraps c so its writes are gathered; under, if not nil, is the
// connection under c's TLS, whose writes of one gathered write (TLS's
// records of it: up to 16 KiB each, far less early in a connection)
// leave in one system call. c is handed to the goroutines that write it
// only after.
func gather(c net.Conn, under *movingDeadlines) *gatheredConn {
	g := &gatheredConn{Conn: c, under: under}
	g.room.L = &g.mu
	return g
}

// Write appends b to what is pending (see gatheredConn).
func (g *gatheredConn) Write(b []byte) (int, error) {
	g.mu.Lock()
	for g.err == nil && g.pending != nil && len(*g.pending) >= gatherMax {
		g.room.Wait()
	}
	if g.err != nil {
		err := g.err
		g.mu.Unlock()
		return 0, err
	}
	if g.pending == nil {
		g.pending = gatherBufs.Get().(*[]byte)
	}
	*g.pending = append(*g.pending, b...)
	if !g.running {
		g.running = true
		go g.flush()
	}
	g.mu.Unlock()
	return len(b), nil
}

// flush writes what is pending until nothing is, then ends; after Close,
// it closes the connection.
func (g *gatheredConn) flush() {
	// Let what is ready to run now (the server's loop, handlers about to
	// write) add to this write first.
	runtime.Gosched()
	for {
		g.mu.Lock()
		p := g.pending
		if p == nil {
			g.running = false
			closed := g.closed
			g.room.Broadcast()
			g.mu.Unlock()
			if closed {
				_ = g.Conn.Close()
			}
			return
		}
		g.pending = nil
		g.room.Broadcast()
		g.mu.Unlock()
		var err error
		if g.under != nil {
			err = g.under.batchWrites(func() error { _, err := g.Conn.Write(*p); return err })
		} else {
			_, err = g.Conn.Write(*p)
		}
		recycleGather(p)
		if err != nil {
			g.mu.Lock()
			if g.err == nil {
				g.err = err
			}
			g.running = false
			g.room.Broadcast()
			g.mu.Unlock()
			// net/http learns of it at its next write; its reader,
			// waiting for the client, at once.
			_ = g.Conn.Close()
			return
		}
	}
}

func recycleGather(p *[]byte) {
	if cap(*p) > 2*gatherMax {
		return
	}
	*p = (*p)[:0]
	gatherBufs.Put(p)
}

// Close closes the connection once what is pending is written (at once
// when nothing is); reads fail from now on.
func (g *gatheredConn) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	if g.err == nil {
		g.err = net.ErrClosed
	}
	g.room.Broadcast()
	running := g.running
	g.mu.Unlock()
	if running {
		_ = g.Conn.SetReadDeadline(time.Unix(1, 0))
		return nil
	}
	return g.Conn.Close()
}

// waitIdle waits until no flush goroutine runs: after Close, until the
// connection is closed.
func (g *gatheredConn) waitIdle() {
	g.mu.Lock()
	for g.running {
		g.room.Wait()
	}
	g.mu.Unlock()
}
