package proxy

import (
	"net"
	"runtime"
	"sync"
)

// Gathered writes on HTTP/2 client connections.
//
// The HTTP/2 server (http/h2srv) already hands the connection what its
// streams answered together, in one Write. crypto/tls turns that Write
// into records of at most 16 KiB and makes a write system call per
// record, so a 64 KiB answer leaves in five system calls. Below TLS, a
// connection that negotiated h2 therefore gathers its writes (gather):
// Write appends to a pending buffer and returns, and a goroutine started
// for the purpose writes what is pending in one system call, after
// letting every goroutine ready to run at that moment run first
// (runtime.Gosched). Measured in-process (BenchmarkH2Load, 8 connections
// of 10 streams, one P): 3.1 write system calls and 124 µs of CPU per
// 64 KiB response, against 7.9 and 133 without; at 100 B the server's
// own gathering leaves nothing to join and the two are the same (39 µs).
// A lone response waits only for the goroutines already ready, a few
// microseconds. With many Ps (a 16-core machine with the governor at
// Max) the flush goroutine may run at once on another P and gather
// less; it then costs a goroutine start per write system call, which
// TLS would have made anyway.
//
// What a write means is otherwise unchanged, as a kernel socket buffer
// makes it: Write returns before the bytes leave, an error of the
// system call (a reset, the moving write deadline: a client that reads
// nothing for WriteTimeout) is returned by the next Write and closes
// the connection at once (the HTTP/2 server's reader ends), and at most
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
	// shut: CloseWrite was called; the flush goroutine half-closes the
	// connection once nothing is pending.
	shut bool
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
			closed, shut := g.closed, g.shut
			g.mu.Unlock()
			if closed {
				_ = c.closeNow()
			} else if shut {
				_ = c.closeWriteNow()
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
			// The HTTP/2 server learns of it at its next write; its reader,
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

// end marks g closed (full: Close) or its sending side ended
// (CloseWrite); writes fail from then on. False: nothing is pending or
// being written, and the caller closes or half-closes the connection
// now; true: the flush goroutine does once what is pending is out (or
// it was done already).
func (g *gatherer) end(full bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.shut && !full {
		return true
	}
	if full {
		g.closed = true
	} else {
		g.shut = true
	}
	if g.err == nil {
		g.err = net.ErrClosed
	}
	g.room.Broadcast()
	return g.running
}
