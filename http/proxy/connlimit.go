package proxy

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// The edge's cap on open client connections, HTTP and HTTPS together
// (HTTP/3 runs over one UDP socket and has its own limits).
//
// Every client connection holds a descriptor, a goroutine and its
// buffers (about 25 KB idle) and may hold an upstream connection beside
// it. Without a cap, clients that open connections and keep them (idle
// keep-alive for IdleTimeout, a head dribbled for ReadTimeout, an
// upgraded connection for as long as it lasts) use up the process's
// descriptors, and then the DNS server's TCP, the admin API, peer dials
// and the ledger's files fail with them. At the cap the listeners stop
// accepting, as nginx does past its worker_connections: a new
// connection waits, unread (one taken from the socket by each listener,
// the rest in the kernel's accept queue; past that, a SYN is not
// answered and the client sends it again), until an open one closes,
// and is then served. Closing it at once, as the DNS stream
// listeners do, suits DNS clients, which ask again over UDP or another
// server; a browser would show an error page for a connection that a
// moment later could have been served.
//
// DefaultMaxConns, or a quarter of the process's descriptor limit when
// that is less (procs.ConnCap): with an upstream connection each, half
// of the descriptors at most, the rest left to DNS and the node. 4,096
// idle connections hold about 100 MB.
const DefaultMaxConns = 4096

// connSlots hands out one slot per open client connection, shared by the
// edge's listeners.
type connSlots struct {
	slots chan struct{}
	log   *slog.Logger
	// logged: when the cap was last logged, ns since monoBase (once a
	// minute at most).
	logged atomic.Int64
}

func newConnSlots(n int, log *slog.Logger) *connSlots {
	return &connSlots{slots: make(chan struct{}, n), log: log}
}

// take waits for a slot; false once stop is closed (the listener is).
func (s *connSlots) take(stop <-chan struct{}) bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
	}
	if now, last := int64(time.Since(monoBase)), s.logged.Load(); (last == 0 || now-last >= int64(time.Minute)) && s.logged.CompareAndSwap(last, now) {
		s.log.Warn("edge proxy at its connection cap: new connections wait until one closes", "max_conns", cap(s.slots))
	}
	select {
	case s.slots <- struct{}{}:
		return true
	case <-stop:
		return false
	}
}

// give hands a slot back.
func (s *connSlots) give() { <-s.slots }

// listenerStop is closed when a listener is: an Accept waiting for a
// slot returns.
type listenerStop struct {
	once sync.Once
	c    chan struct{}
}

func newListenerStop() *listenerStop { return &listenerStop{c: make(chan struct{})} }

func (l *listenerStop) stop() { l.once.Do(func() { close(l.c) }) }

// release gives c's slot back, once, as c closes (closeNow).
func (c *movingDeadlines) release() {
	if c.slots != nil && c.slotHeld.Swap(false) {
		c.slots.give()
	}
}
