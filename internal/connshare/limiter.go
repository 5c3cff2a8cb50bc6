package connshare

import (
	"net"
	"sync/atomic"
)

// Limiter caps a listener's open connections at maxConns and holds each
// client address to its share of them (the Counter it embeds). A
// connection holds a place in its address's share (Enter) and a slot of
// the cap (Take, TryTake, or both at once: Admit), and gives both back
// as it closes (Leave, Give).
//
// The cap is a buffered channel of maxConns: a slot taken is a send, one
// given back a receive, so a listener that waits for a slot (the edge's
// TCP listeners: Take) waits in a select with its own stop, and one that
// does not (DNS, the edge's QUIC connections: TryTake, Admit) refuses at
// once. Each costs a channel operation per connection, none per
// request.
type Limiter struct {
	*Counter
	slots chan struct{}
	atCap atomic.Int64
}

// NewLimiter caps at maxConns (at least 1) connections, perAddr of them
// for one address (0: Share); countLoopback counts loopback clients too
// (tests).
func NewLimiter(maxConns, perAddr int, countLoopback bool) *Limiter {
	maxConns = max(maxConns, 1)
	return &Limiter{Counter: New(maxConns, perAddr, countLoopback), slots: make(chan struct{}, maxConns)}
}

// Max is the cap.
func (l *Limiter) Max() int { return cap(l.slots) }

// Held is the slots taken now.
func (l *Limiter) Held() int { return len(l.slots) }

// AtCap counts the connections Admit refused at the cap since
// NewLimiter (those refused over their share count in Refused).
func (l *Limiter) AtCap() int64 { return l.atCap.Load() }

// TryTake takes a slot if one is free.
func (l *Limiter) TryTake() bool {
	select {
	case l.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// Take takes a slot, waiting while none is free; false once stop is
// closed.
func (l *Limiter) Take(stop <-chan struct{}) bool {
	select {
	case l.slots <- struct{}{}:
		return true
	case <-stop:
		return false
	}
}

// Give gives a slot back.
func (l *Limiter) Give() { <-l.slots }

// Admit counts a connection from a in its address's share and takes a
// slot for it, without waiting. ok false: refused, holding nothing;
// atCap tells a refusal at the cap (counted in AtCap) from one over the
// address's share (counted in Refused), and the place names the address
// for the latter.
func (l *Limiter) Admit(a net.Addr) (p Place, atCap, ok bool) {
	p, ok = l.Enter(a)
	if !ok {
		return p, false, false
	}
	if !l.TryTake() {
		l.Leave(p)
		l.atCap.Add(1)
		return Place{}, true, false
	}
	return p, false, true
}
