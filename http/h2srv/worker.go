package h2srv

import (
	"runtime"
	"sync"
)

// maxParked bounds the handler goroutines parked per pool (see the
// package doc for why they are kept).
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
