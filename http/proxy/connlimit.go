package proxy

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"peerdns/internal/connshare"
)

// The edge's cap on open client connections, HTTP and HTTPS together,
// HTTP/3's QUIC connections counted in it (admitQUIC).
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
//
// One client address may hold at most a share of the cap
// (internal/connshare: 256, or a quarter of the cap when less; an IPv6
// client counted by its /64; loopback not counted): one host that opens
// connections without end would otherwise fill the cap alone and keep
// everyone else waiting. A connection over its address's share is closed
// at once (the listener cannot wait for that address without keeping
// every other one waiting too).
const DefaultMaxConns = 4096

// connSlots hands out one slot per open client connection, shared by the
// edge's listeners, and counts each client address's share of them
// (connshare.Limiter); it logs when either is full.
type connSlots struct {
	lim *connshare.Limiter
	log *slog.Logger
	// logged, loggedAddr: when the cap, an address's share, was last
	// logged, ns since monoBase (once a minute at most).
	logged, loggedAddr atomic.Int64
}

// newConnSlots: n slots, perAddr of them for one address (0: the
// default share); countLoopback counts loopback clients against their
// share too (tests).
func newConnSlots(n, perAddr int, countLoopback bool, log *slog.Logger) *connSlots {
	return &connSlots{lim: connshare.NewLimiter(n, perAddr, countLoopback), log: log}
}

// admit counts a client at a under its address's share: the slot it is
// to hold, nil when its address holds its share already.
func (s *connSlots) admit(a net.Addr) *clientSlot {
	p, ok := s.lim.Enter(a)
	if !ok {
		s.overShare(p)
		return nil
	}
	return &clientSlot{slots: s, place: p}
}

// overShare logs (once a minute at most) that p's address was refused
// a connection over its share.
func (s *connSlots) overShare(p connshare.Place) {
	if minuteOver(&s.loggedAddr) {
		s.log.Warn("edge proxy: a client address holds its share of the connections; its new ones are closed", "addr", p.Addr().String(), "per_addr", s.lim.PerAddr())
	}
}

// take waits for a slot; false once stop is closed (the listener is).
func (s *connSlots) take(stop <-chan struct{}) bool {
	if s.lim.TryTake() {
		return true
	}
	if minuteOver(&s.logged) {
		s.log.Warn("edge proxy at its connection cap: new connections wait until one closes", "max_conns", s.lim.Max())
	}
	return s.lim.Take(stop)
}

// minuteOver reports whether a minute has passed since *last (ns since
// monoBase; 0: never), and if so moves *last to now: true for one
// caller a minute.
func minuteOver(last *atomic.Int64) bool {
	now, l := int64(time.Since(monoBase)), last.Load()
	return (l == 0 || now-l >= int64(time.Minute)) && last.CompareAndSwap(l, now)
}

// admitQUIC holds a place for an HTTP/3 connection from a in the cap and
// in its address's share, without waiting: nil when either is full.
// Unlike a TCP connection, a QUIC one has been read and its handshake
// finished (its address proven: h3.go listens without early
// connections) by the time the edge sees it, so there is nothing left to hold
// unread; it is closed instead, and its client (a browser, curl) goes
// on over HTTP/2 or HTTP/1.1 on TCP, where the cap waits. The limiter
// counts either refusal.
func (s *connSlots) admitQUIC(a net.Addr) *clientSlot {
	p, atCap, ok := s.lim.Admit(a)
	switch {
	case ok:
		cs := &clientSlot{slots: s, place: p}
		cs.held.Store(true)
		return cs
	case atCap:
		if minuteOver(&s.logged) {
			s.log.Warn("edge proxy at its connection cap: new HTTP/3 connections are closed (their clients go on over TCP)", "max_conns", s.lim.Max())
		}
	default:
		s.overShare(p)
	}
	return nil
}

// listenerStop is closed when a listener is: an Accept waiting for a
// slot returns.
type listenerStop struct {
	once sync.Once
	c    chan struct{}
}

func newListenerStop() *listenerStop { return &listenerStop{c: make(chan struct{})} }

func (l *listenerStop) stop() { l.once.Do(func() { close(l.c) }) }

// clientSlot is what a client connection holds of its listener's cap:
// a place in its address's share (admit), and a slot once held (take).
type clientSlot struct {
	slots *connSlots
	place connshare.Place
	held  atomic.Bool
}

// leave gives the address's place back.
func (cs *clientSlot) leave() { cs.slots.lim.Leave(cs.place) }

// release gives the place and the slot back, once.
func (cs *clientSlot) release() {
	if cs.held.Swap(false) {
		cs.leave()
		cs.slots.lim.Give()
	}
}

// release gives c's slot back as c closes (closeNow).
func (c *movingDeadlines) release() {
	if c.slot != nil {
		c.slot.release()
	}
}
