package proxy

import (
	"net"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// idlePeek is what a pooled upstream connection's looks need: its
// socket's descriptor and its place among its pool's idle connections
// (idleWatch). Made once per connection, at its first look or the first
// time it goes back to the pool.
type idlePeek struct {
	// fd is the socket's descriptor, read once through its RawConn; -1:
	// the connection is no socket of this machine (a peer's tunnel
	// stream).
	fd  int
	buf [1]byte
	// Guarded by the pool's idleWatch.mu:
	idx   int   // the connection's place in idleWatch.idle; -1: not there
	since int64 // when it last went back to the pool, ns since monoBase
	spoke bool  // a look saw something come in while it was idle
}

// peekOf is c's idlePeek, made (its descriptor read) at the first call.
// Called by the one goroutine that holds c (out of the pool).
func (c *movingDeadlines) peekOf() *idlePeek {
	if c.peek != nil {
		return c.peek
	}
	p := &idlePeek{fd: -1, idx: -1}
	c.peek = p
	var tc *net.TCPConn
	if ts, ok := c.Conn.(tcpSource); ok {
		tc = ts.TCPConn()
	} else {
		tc, _ = c.Conn.(*net.TCPConn)
	}
	if tc == nil {
		return p
	}
	if raw, err := tc.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) { p.fd = int(fd) })
	}
	return p
}

// idleReadable reports whether the upstream's socket under c has
// something to read (bytes, its end, an error) before a request is sent
// on it: one recvfrom(2) with MSG_PEEK and MSG_DONTWAIT, which waits for
// nothing and takes nothing (see idleSpoke). A connection that is not a
// TCP socket of this machine reports false.
//
// The descriptor is read once, and the look made on it directly rather
// than inside RawConn.Control, whose lock on the descriptor was half of
// the look's cost (perf, the same-node route at 100 B:
// docs/bench-history.md). It is safe here because the connection is
// the caller's alone between the pool handing it out and the request
// being written: nothing closes it meanwhile (the pool's cleaner closes
// only connections in its idle list, and the connection's own halts are
// set only once the request goes), so the descriptor is still this
// socket's. Were it ever not, the look would still take nothing from
// whichever socket holds the number now (MSG_PEEK): the worst it could
// do is close this connection unused.
func (c *movingDeadlines) idleReadable() bool {
	p := c.peekOf()
	if p.fd < 0 {
		return false
	}
	// A raw system call: unix.Recvfrom allocates the sender's address at
	// each call, and this one never blocks.
	_, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(p.fd), uintptr(unsafe.Pointer(&p.buf[0])), 1,
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	// No error: bytes, or (none) the upstream closed; EAGAIN: nothing;
	// anything else (a reset) is no connection to use either.
	return errno == 0 || errno != unix.EAGAIN && errno != unix.EINTR
}

// lookEvery is how long a look into a pool's idle connections serves
// (idleWatch).
const lookEvery = time.Millisecond

// idleWatch looks into one upstream pool's idle connections together:
// one poll(2) over all of them serves every connection idle when it
// began for lookEvery, instead of a look (a system call) into each
// connection as it is handed out. A look marks those that had
// something come in (idlePeek.spoke), and a marked connection is closed
// unused when the pool hands it out.
//
// What a connection handed out was checked against: a look begun after
// it went back to the pool, and at most lookEvery before it is handed
// out; failing either, a look is made then (into it and every other idle
// connection). So bytes an upstream writes right after an answer (a
// second, unasked answer; a body after the answer to a HEAD) are seen,
// as they were by a look at each hand-out; what comes within lookEvery
// before the request goes is not, as nginx sees an idle upstream
// connection's bytes only at its event loop's next turn (and a look at
// each hand-out misses what comes between the look and the request).
// A close missed that way fails an idempotent request, which is asked
// again on another connection (retryable); a request that is never
// sent twice (a POST) is not served by a shared look: its connection is
// looked into alone as it is handed out (spoke's once), so only a close
// that comes between that look and the request can fail it with a 502,
// as with nginx.
//
// Why: every system call costs; on the paravirtualized 2-vCPU machine of
// bench/README.md even getpid(2) takes 1.2 µs, and the look at each
// hand-out cost the same-node route a tenth of its rate at 100 B
// (docs/bench-history.md). A poll over the idle connections costs that
// call and some 40 ns a connection. A look covers every connection idle
// when it begins, and the pool hands out its oldest idle connection
// first (fasthttp's FIFO), so the next look comes when those have all
// been handed out, or a millisecond later: looks a second are about the
// request rate over the connections idle at a look, and at least a
// thousand while requests come. Counted with perf on the same-node
// route at 100 B, 2 vCPU, 27k-33k requests a second: a look per 3.7
// requests with 8 client connections, per 9 with 32, per 20 with 128,
// per 28 with 512 (1,000 a second; there 2% of requests also found a
// look under way and looked alone). A 16-core machine proxying 200k
// requests a second through a pool with 64 connections idle at a time
// would make some 3,000 looks of 4 µs a second (1% of one core) instead
// of 200k system calls of 1 µs or more. The watch's lock is taken twice
// a request, as the pool's own (fasthttp's connsLock); a look is made
// outside it.
type idleWatch struct {
	every int64 // lookEvery, in ns
	mu    sync.Mutex
	idle  []*movingDeadlines // connections in the pool's idle list, in no order
	// done: when the last finished look began, ns since monoBase (0:
	// none yet); busy: a look is under way.
	done int64
	busy bool
	// fds, seen: the look under way's descriptors (the connection handed
	// out first) and connections (busy's).
	fds   []unix.PollFd
	seen  []*movingDeadlines
	looks int // looks made (tests)
}

func newIdleWatch() *idleWatch { return &idleWatch{every: int64(lookEvery)} }

// add notes that c goes back to the pool. Called before the pool has
// it (it is then the caller's alone); a connection that is not a socket
// of this machine is not watched.
func (w *idleWatch) add(c *movingDeadlines) {
	p := c.peekOf()
	if p.fd < 0 {
		return
	}
	w.mu.Lock()
	if p.idx < 0 {
		p.idx = len(w.idle)
		w.idle = append(w.idle, c)
	}
	// Read under the lock, as a look's start is: a look that began
	// before c was in the list counts as none for it.
	p.since, p.spoke = int64(time.Since(monoBase)), false
	w.mu.Unlock()
}

// drop notes that c is closed (the pool's cleaner closes idle ones).
func (w *idleWatch) drop(c *movingDeadlines) {
	w.mu.Lock()
	w.remove(c)
	w.mu.Unlock()
}

// remove takes c out of idle. w.mu is held.
func (w *idleWatch) remove(c *movingDeadlines) {
	p := c.peek
	if p == nil || p.idx < 0 {
		return
	}
	last := len(w.idle) - 1
	moved := w.idle[last]
	w.idle[p.idx] = moved
	moved.peek.idx = p.idx
	w.idle[last] = nil
	w.idle = w.idle[:last]
	p.idx = -1
}

// spoke reports whether c, just handed out by the pool, had something to
// read come in while it was idle, by a look at most lookEvery old begun
// after it went back, or by one made now. once: the request to go on c
// is never sent twice (a POST), so a close the last look missed would
// fail it rather than be asked again elsewhere: c is looked into now,
// alone (one recvfrom(2)), whatever the last look.
func (w *idleWatch) spoke(c *movingDeadlines, once bool) bool {
	p := c.peekOf()
	if p.fd < 0 {
		return false
	}
	w.mu.Lock()
	w.remove(c)
	if p.spoke {
		w.mu.Unlock()
		return true
	}
	if once {
		w.mu.Unlock()
		return c.idleReadable()
	}
	start := int64(time.Since(monoBase))
	if w.done > p.since && start-w.done < w.every {
		w.mu.Unlock()
		return false
	}
	if w.busy { // another goroutine looks: this one looks alone
		w.mu.Unlock()
		return c.idleReadable()
	}
	w.busy = true
	w.looks++
	fds := append(w.fds[:0], pollIn(p.fd))
	seen := w.seen[:0]
	for _, o := range w.idle {
		fds = append(fds, pollIn(o.peek.fd))
		seen = append(seen, o)
	}
	w.fds, w.seen = fds, seen
	w.mu.Unlock()

	// poll(2) with no wait: a raw system call. It takes nothing from any
	// socket. A descriptor of a connection closed meanwhile (by the
	// pool's cleaner) may name another socket by now: its result is
	// dropped below, the connection being no longer idle.
	_, _, errno := unix.RawSyscall(unix.SYS_POLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), 0)

	w.mu.Lock()
	mine := fds[0].Revents != 0
	if errno == 0 {
		for i, o := range seen {
			// Still idle since before the look began: what the look
			// saw came while it was.
			if fds[i+1].Revents != 0 && o.peek.idx >= 0 && o.peek.since < start {
				o.peek.spoke = true
				w.remove(o)
			}
		}
		w.done = start
	}
	clear(seen)
	w.busy = false
	w.mu.Unlock()
	if errno != 0 {
		return c.idleReadable()
	}
	return mine
}

// pollIn is a poll(2) entry for fd's bytes, its end or its errors.
func pollIn(fd int) unix.PollFd {
	return unix.PollFd{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}
}
