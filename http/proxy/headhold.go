package proxy

import (
	"net"
	"runtime"
	"sync"
	"sync/atomic"
)

// A streamed answer's head, held for its body's first piece.
//
// The head of a streamed answer longer than the write buffer is flushed
// before its body (flush.go), so that a client sees it while a slow
// upstream has sent nothing more. On a plain HTTP connection that head
// was a write system call of its own, a few hundred bytes, with the
// body's first piece (the bytes that came with the upstream's head)
// written right after it: on loopback each write also delivers to the
// reader and wakes it, and of the four write system calls a 64 KiB
// answer cost the node on the same-node route, the head's was one.
//
// So the connection holds the head (holdHead, armed by the serving
// goroutine for one answer) and writes it with the next write, in one
// system call (writev), or, when the serving goroutine blocks first (an
// upstream with nothing more to send yet), a goroutine started with the
// hold (unless the one started for an earlier head has not run yet: it
// takes this one too) writes it alone once the goroutines ready to run
// have run: a slow upstream's head goes out when its body does not come
// at once, as it did. Close writes a head still held before closing. A
// held answer allocates nothing.
//
// This is the gatherer's way (gather.go: a flush goroutine that lets the
// ready goroutines run first, an error kept for the next Write) for one
// small write. The gatherer itself is not used here: it copies every
// write into its pending buffer and writes from its own goroutine, which
// for a 64 KiB body is a copy and a hand-off per answer; the hold copies
// only the head and writes the body from the caller's buffer.
//
// The two goroutines take turns under headHold.mu; the deadlines they
// move are atomic (deadline). A write error of the goroutine is given to
// the next Write.
//
// On one P (the node's usual state, internal/procs) the goroutine runs
// only once the serving one blocks, so the head waits exactly as long as
// the body's first piece takes to be here already. With many Ps (a big
// machine with the governor at Max) it may run at once on another P and
// write the head alone, as before: the saving is lost there and the
// goroutine's start (about a microsecond) is what it costs. Measured on
// the same-node route (bench/README.md): write system calls per 64 KiB
// answer 3.95 → 2.0, 66.7 → 61.7 µs of CPU an answer.

type headHold struct {
	active  atomic.Bool // armed, held or err: Write takes the slow path
	flusher func()      // flush for this connection, made once: a go statement with arguments allocates each time
	mu      sync.Mutex
	armed   bool   // the next Write is the head to hold
	held    []byte // the head held (len 0: none); its array is kept for the next
	pending bool   // held is to be written
	running bool   // a flush goroutine is started and has not looked yet
	err     error  // the goroutine's write error, for the next Write
	// vec and bufs: the head and the next write as one writev, kept here
	// so that a held answer allocates nothing.
	vec  [2][]byte
	bufs net.Buffers
}

// holdHead makes c hold its next write, the head of a streamed answer.
// Only the goroutine that serves the connection calls it.
func (c *movingDeadlines) holdHead() {
	h := c.head.Load()
	if h == nil {
		h = &headHold{}
		h.flusher = func() { h.flush(c) }
		c.head.Store(h)
	}
	h.mu.Lock()
	h.armed = true
	h.active.Store(true)
	h.mu.Unlock()
}

// maxHeldHead bounds a head that is held: a larger one is written at
// once (it is not the small write this saves).
const maxHeldHead = 8 << 10

// write is Write while a head is armed, held or failed; done false: the
// caller writes b as usual.
func (h *headHold) write(c *movingDeadlines, b []byte) (n int, err error, done bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.err != nil:
		err, h.err = h.err, nil
		h.settle()
		return 0, err, true
	case h.pending:
		h.pending = false
		h.settle()
		h.vec[0], h.vec[1] = h.held, b
		h.bufs = h.vec[:]
		m, err := c.writeBuffers(&h.bufs)
		h.vec[1], h.bufs = nil, nil // b is the caller's
		head := int64(len(h.held))
		h.held = h.held[:0]
		if m < head {
			return 0, err, true
		}
		return int(m - head), err, true
	case h.armed && len(b) <= maxHeldHead:
		h.armed = false
		h.held = append(h.held[:0], b...)
		h.pending = true
		if !h.running { // one started for an earlier head will see this one
			h.running = true
			go h.flusher()
		}
		return len(b), nil, true
	}
	h.armed = false
	h.settle()
	return 0, nil, false
}

// settle clears active when nothing is left to do; the caller holds mu.
func (h *headHold) settle() {
	if !h.armed && !h.pending && h.err == nil {
		h.active.Store(false)
	}
}

// flush writes a head still held once the goroutines ready to run have
// run (the serving one among them: it writes the head with its body's
// first piece if that came at once).
func (h *headHold) flush(c *movingDeadlines) {
	runtime.Gosched()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.running = false
	h.writeHeld(c)
}

// writeHeld writes the held head, if any; the caller holds mu.
func (h *headHold) writeHeld(c *movingDeadlines) {
	if !h.pending {
		return
	}
	h.pending = false
	if _, err := c.writeNow(h.held); err != nil && h.err == nil {
		h.err = err
	}
	h.held = h.held[:0]
	h.settle()
}

// flushHeld writes the head c holds, if any, and returns the error of
// that write or of an earlier one of the flush goroutine's: a body that
// goes to the socket past Write (splice.go) must not overtake its head,
// and Close writes a head still held before it closes.
func (c *movingDeadlines) flushHeld() error {
	h := c.head.Load()
	if h == nil || !h.active.Load() {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writeHeld(c)
	err := h.err
	h.err = nil
	h.settle()
	return err
}

// writeBuffers is writeNow for several pieces in one system call.
func (c *movingDeadlines) writeBuffers(bufs *net.Buffers) (int64, error) {
	if err := c.moveWrite(); err != nil {
		return 0, err
	}
	return bufs.WriteTo(c.Conn)
}
