package peer

import (
	"context"
	"errors"
	"time"

	"peerdns/transport"
)

// QUIC retries for peers on TCP. A dial keeps whichever path is up first,
// and TCP wins whenever QUIC fails at that moment: UDP blocked for good,
// or only for now. The second case is common: a router's UDP mapping left
// over from QUIC attempts made before a path opened still rewrites our
// packets (Linux conntrack keeps an unanswered UDP mapping 30 s after its
// last packet, and every retry renews it), while TCP, from a fresh port,
// gets through. A session on TCP would then stay on TCP for good, since
// the dialers' gate keeps every dialer off a connected peer.
//
// So a peer connected over TCP is dialed over QUIC alone, at its hello's
// addresses, quicRetryFirst after the session came up (past a stale
// mapping's lifetime, counted from the end of the losing QUIC attempt,
// which runs up to the handshake timeout), then after each failure at
// gaps doubling from quicRetryGap up to quicRetryMax (each past a stale
// mapping's lifetime too). A QUIC connection that comes up replaces the TCP one (a
// better path wins, at both ends alike) and the TCP connection drains.
// Both ends retry; the higher id of the pair starts quicRetryStagger
// later, so usually only one QUIC connection is made. Where UDP stays
// blocked this costs one failed handshake per peer every ten minutes.
const (
	quicRetryFirst   = 45 * time.Second
	quicRetryGap     = time.Minute
	quicRetryStagger = 15 * time.Second
	quicRetryMax     = 10 * time.Minute
)

// quicDialer dials QUIC alone (transport.MultiEndpoint).
type quicDialer interface {
	DialQUIC(ctx context.Context, addr, peerID string) (transport.Conn, error)
}

// quicRetry is one TCP peer's schedule; touched only from Receive.
type quicRetry struct {
	conn     transport.Conn // the TCP connection the schedule belongs to
	next     time.Time
	gap      time.Duration
	inFlight bool
}

// quicRetryDone: a QUIC retry ended without a connection, or with one
// refused at admission (onConn).
type quicRetryDone struct {
	peer string
	err  error
}

// quicRetryTick starts the QUIC retries that are due.
func (a *Actor) quicRetryTick(now time.Time) {
	qd, ok := a.d.Endpoint.(quicDialer)
	if !ok {
		return
	}
	for id, r := range a.quicRetries {
		if e := a.sessions[id]; e == nil || e.conn != r.conn {
			delete(a.quicRetries, id)
		}
	}
	for id, e := range a.sessions {
		if !e.up || e.hello == nil {
			continue
		}
		if p, _ := transport.PathOf(e.conn); p != transport.PathTCP {
			continue
		}
		r := a.quicRetries[id]
		if r == nil {
			first := quicRetryFirst
			if a.self > id {
				first += quicRetryStagger
			}
			r = &quicRetry{conn: e.conn, next: e.upAt.Add(first)}
			a.quicRetries[id] = r
		}
		if r.inFlight || now.Before(r.next) {
			continue
		}
		addrs := a.quicRetryAddrs(id, e)
		if len(addrs) == 0 {
			continue
		}
		r.inFlight = true
		a.quicRetried++
		a.diag.attempt()
		root, self, ctx, target, gate := a.sys.Root, a.pid, a.ctx, id, a.gate
		go func() {
			var err error
			for _, addr := range addrs {
				var conn transport.Conn
				actx, release := gate.attempt(ctx, target) // the peer's own retry may win
				conn, err = qd.DialQUIC(actx, addr, target)
				release()
				if err == nil {
					root.Send(self, &newConn{conn: conn, addr: addr, quicRetry: true})
					return
				}
				if errors.Is(err, transport.ErrSelf) {
					root.Send(self, &dialFailed{addr: addr, peer: target, err: err})
				}
				if ctx.Err() != nil {
					return
				}
			}
			root.Send(self, &quicRetryDone{peer: target, err: err})
		}()
	}
}

// quicRetryAddrs lists where to dial a TCP peer over QUIC: the address we
// dialed, then the ones its hello gives, at most maxPunchAddrs.
func (a *Actor) quicRetryAddrs(id string, e *sessionEntry) []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if s != "" && !seen[s] && validAddr(s) && !a.isOwn(s) && len(out) < maxPunchAddrs {
			seen[s] = true
			out = append(out, s)
		}
	}
	add(e.dialAddr)
	for _, s := range e.hello.Addrs {
		add(s)
	}
	return out
}

// onQuicRetryDone schedules the next retry.
func (a *Actor) onQuicRetryDone(m *quicRetryDone) {
	r := a.quicRetries[m.peer]
	if r == nil {
		return
	}
	a.quicRetryFailed++
	r.inFlight = false
	r.gap = min(max(r.gap*2, quicRetryGap), quicRetryMax)
	r.next = a.d.Now().Add(r.gap)
	a.log.Debug("QUIC retry for a TCP peer failed", "peer", short(m.peer), "next", r.gap, "err", m.err)
}
