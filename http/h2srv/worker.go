package h2srv

import (
	"runtime"
	"sync"
)

// Handler goroutines are kept for reuse: a goroutine whose connection
// has no stream waiting parks in one of the Server's worker pools
// instead of exiting, and the next stream of any connection using that
// pool runs on it. Its stack, grown to what handlers need, is kept, so
// that a request does not pay to start a goroutine and grow its stack
// again (copystack was about a tenth of the CPU a small request cost).
//
// Why this does not hurt a many-core machine: the pools are sharded,
// one per P (GOMAXPROCS at New), a connection using one shard, so the
// mutex taken per request start is shared by a few connections, not
// by all; each shard parks at most maxParked goroutines (LIFO: the
// warmest stacks are reused first), so parked memory is bounded by
// GOMAXPROCS × maxParked stacks (16 cores: 1024 goroutines, a few KiB
// of stack each, and the GC shrinks idle stacks); a burst beyond that
// starts goroutines that exit when done, as without a pool. A parked
// goroutine costs no CPU: it waits on its channel.
const maxParked = 64

type workerPool struct {
	mu     sync.Mutex
	parked []*worker
	closed bool
}

type worker struct {
	next chan *stream
}

func newPools() []workerPool { return make([]workerPool, runtime.GOMAXPROCS(0)) }

// start runs s (then the streams its connection queues) on a parked
// goroutine of p, or a new one.
func (p *workerPool) start(s *stream) {
	p.mu.Lock()
	if n := len(p.parked); n > 0 {
		w := p.parked[n-1]
		p.parked[n-1] = nil
		p.parked = p.parked[:n-1]
		p.mu.Unlock()
		w.next <- s
		return
	}
	p.mu.Unlock()
	w := &worker{next: make(chan *stream, 1)}
	go w.loop(p, s)
}

func (w *worker) loop(p *workerPool, s *stream) {
	for s != nil {
		s.c.run(s)
		if !p.park(w) {
			return
		}
		s = <-w.next
	}
}

func (p *workerPool) park(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.parked) >= maxParked {
		return false
	}
	p.parked = append(p.parked, w)
	return true
}

// close ends the parked goroutines; those running end when done.
func (p *workerPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, w := range p.parked {
		w.next <- nil
	}
	p.parked = nil
}
