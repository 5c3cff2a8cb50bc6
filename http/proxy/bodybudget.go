package proxy

import (
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Request bodies are read whole before the handler runs (fasthttp's
// default; see the package doc), and for a declared Content-Length
// fasthttp allocates all of it as soon as the head has arrived. Without a
// bound, heads that each declare MaxBodyBytes and then send nothing
// would make the node allocate 64 MiB per connection, for as long as the
// read timeout lets them wait. So bodies of at least BigBody bytes take
// their declared size from a budget shared by both listeners when their
// head arrives (fasthttp's HeaderReceived hook, before anything is
// allocated), and give it back when their handler returns or their
// request fails. One that does not fit is refused with 503 and
// Retry-After: 1 (the server is busy, the request itself is fine); a
// body over MaxBodyBytes is still 413.
//
// A request with a body also gets more time than ReadTimeout to send it:
// ReadTimeout plus the time its declared length takes at MinBodyRate
// (64 KiB/s; a chunked body, MaxBodyBytes' worth), set when its head
// arrives. fasthttp's ReadTimeout covers head and body together, so a
// 64 MiB upload from a home uplink (a few MB/s) was cut with 408 at 10 s.
const (
	BodyBudget  = 256 << 20
	BigBody     = 1 << 20
	MinBodyRate = 64 << 10 // bytes per second
)

type bodyBudget struct {
	mu   sync.Mutex
	left int64
	// held is the reservation of each request in flight, by its header
	// (a connection's RequestCtx is reused, so at most one per
	// connection); n == 0 marks a refused request.
	held map[*fasthttp.RequestHeader]hold
	// stale: a reservation older than this is given back when room is
	// short, in case a request ended by a path that reached neither the
	// handler nor the error handler (fasthttp has a few, around
	// Expect: 100-continue).
	stale   time.Duration
	refused int64
}

type hold struct {
	n  int64
	at time.Time
}

func newBodyBudget(total int64, stale time.Duration) *bodyBudget {
	return &bodyBudget{left: total, held: map[*fasthttp.RequestHeader]hold{}, stale: stale}
}

// headerReceived is fasthttp's HeaderReceived hook: the budget, and the
// time a body may take.
func (s *Server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	n := h.ContentLength()
	if !s.budget.take(h, int64(n)) {
		// fasthttp stops at the declared length, before allocating.
		return fasthttp.RequestConfig{MaxRequestBodySize: 1}
	}
	switch {
	case n > 0 && n <= MaxBodyBytes:
		return fasthttp.RequestConfig{ReadTimeout: s.d.ReadTimeout + time.Duration(n)*time.Second/MinBodyRate}
	case n == -1: // chunked
		return fasthttp.RequestConfig{ReadTimeout: s.d.ReadTimeout + MaxBodyBytes*time.Second/MinBodyRate}
	}
	return fasthttp.RequestConfig{}
}

// take reserves a large body's declared length n for the request of h;
// false: it does not fit (the refusal is remembered for give).
func (b *bodyBudget) take(h *fasthttp.RequestHeader, n int64) bool {
	if n < BigBody || n > MaxBodyBytes {
		return true // small, chunked, or a 413 anyway
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.held[h]; ok {
		b.left += old.n
		delete(b.held, h)
	}
	if b.left < n {
		for k, v := range b.held {
			if now.Sub(v.at) > b.stale {
				b.left += v.n
				delete(b.held, k)
			}
		}
	}
	if b.left < n {
		b.held[h] = hold{at: now}
		b.refused++
		return false
	}
	b.left -= n
	b.held[h] = hold{n: n, at: now}
	return true
}

// give hands back what the request of h holds and reports whether it was
// refused.
func (b *bodyBudget) give(h *fasthttp.RequestHeader) (refused bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.held[h]
	if !ok {
		return false
	}
	delete(b.held, h)
	b.left += v.n
	return v.n == 0
}

// stats: bytes free and requests refused so far.
func (b *bodyBudget) stats() (left, refused int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.left, b.refused
}
