package proxy

import (
	"net"
	"runtime"
	"sync"
)

// Gathered writes on HTTP/2 client connections.
//
// net/http's HTTP/2 server flushes its 4 KiB frame buffer to the
// connection whenever its queue of frames to write runs empty, each
// flush a TLS record and a write system call. A response is at least
// two frames, HEADERS and DATA, and the handler hands over the second
// only once the first is written: with nothing else queued in between,
// the server flushes between the two. Under h2load (8 connections, 10
// streams each) that makes 1.9 write system calls per 100 B response,
// for the edge and for a bare net/http HTTP/2 server alike, and the
// system calls the largest part of what a request costs the node.
//
// A connection that negotiated h2 therefore gathers its writes
// (gather): Write appends to a pending buffer and returns, and a
// goroutine started for the purpose writes what is pending in one
// system call, after letting every goroutine ready to run at that
// moment run first (runtime.Gosched): the handlers whose frames the
// server is about to write, the server's own loop. On one P (the node's
// usual state, internal/procs) that is a write per connection per round
// of the scheduler, however many streams answered in it: measured on a
// bare net/http HTTP/2 server under the same h2load, 0.1 write system
// calls and 44 µs of CPU per response against 1.9 and 62 µs without. A
// lone response waits only for the goroutines already ready, a few
// microseconds. With many Ps (a 16-core machine with the governor at
// Max) the flush goroutine may run at once on another P and gather
// less; it then costs a goroutine start per write system call, which
// the handler's own write would have made anyway.
//
// What a write means is otherwise unchanged, as a kernel socket buffer
// makes it: Write returns before the bytes leave, an error of the
// system call (a reset, the moving write deadline: a client that reads
// nothing for WriteTimeout) is returned by the next Write and closes
// the connection at once (net/http's reader ends), and at most
// gatherMax bytes wait: a writer past it waits for the system call, as
// it would for a full socket buffer. Close hands what is pending to the
// system call still (a GOAWAY, TLS's close_notify), as a socket closed
// with unsent bytes does, and closes the connection after it, within
// the same write deadline; reads fail from Close on.
type gatherer struct {
	mu      sync.Mutex
	room    sync.Cond // a writer waits for the pending bytes to go under gatherMax
	pending *[]byte   // from gatherBufs; nil when nothing is pending
	err     error     // the system call's error, or net.ErrClosed after Close
	running bool      // a flush goroutine runs
	closed  bool      // Close was called; the flush goroutine closes the connection
}

// gatherMax bounds the bytes a connection holds pending (a client that
// reads nothing holds that much of the node's memory until the write
// deadline, beside what the kernel's socket buffer holds): eight 16 KiB
// frames, two 64 KiB answers in one system call.
const gatherMax = 128 << 10

var gatherBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// gather makes c gather its writes from now on. It is called before c
// is handed to the goroutines that write it.
func (c *movingDeadlines) gather() {
	g := &gatherer{}
	g.room.L = &g.mu
	c.gathered.Store(g)
}

// write appends b to what is pending (see gatherer).
func (g *gatherer) write(c *movingDeadlines, b []byte) (int, error) {
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
		go g.flush(c)
	}
	g.mu.Unlock()
	return len(b), nil
}

// flush writes what is pending until nothing is, then ends; after Close,
// it closes the connection.
func (g *gatherer) flush(c *movingDeadlines) {
	// Let what is ready to run now (the server's loop, handlers about to
	// write) add to this write first.
	runtime.Gosched()
	for {
		g.mu.Lock()
		p := g.pending
		if p == nil {
			g.running = false
			closed := g.closed
			g.mu.Unlock()
			if closed {
				_ = c.closeNow()
			}
			return
		}
		g.pending = nil
		g.room.Broadcast()
		g.mu.Unlock()
		_, err := c.writeNow(*p)
		g.recycle(p)
		if err != nil {
			g.mu.Lock()
			if g.err == nil {
				g.err = err
			}
			g.room.Broadcast()
			g.running = false
			g.mu.Unlock()
			// net/http learns of it at its next write; its reader,
			// waiting for the client, at once.
			_ = c.closeNow()
			return
		}
	}
}

func (g *gatherer) recycle(p *[]byte) {
	if cap(*p) > 2*gatherMax {
		return
	}
	*p = (*p)[:0]
	gatherBufs.Put(p)
}

// close marks g closed; false: nothing is pending or being written, and
// the caller closes the connection now.
func (g *gatherer) close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return true
	}
	g.closed = true
	if g.err == nil {
		g.err = net.ErrClosed
	}
	g.room.Broadcast()
	return g.running
}
