package transport

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// DefaultMaxPendingInbound is Config.MaxPendingInbound's default. Honest
// peers are admitted within one round trip of the hello, so even a large
// network rarely has more than a few pending at once; 64 leaves room for
// a burst of reconnects after a restart.
const DefaultMaxPendingInbound = 64

// errTooManyPending refuses a connection at its first packet.
var errTooManyPending = errors.New("too many pending inbound connections")

// pendingGate bounds the inbound connections that have not been admitted
// by the layer above: those in the QUIC/TLS handshake, those opening their
// control stream and those waiting in the peer handshake. Keys cost
// nothing to make, so a proven key earns a connection no standing; only
// Conn.Admit (the peer layer found a writer or redeemed an invite) frees
// its place. Safe for concurrent use: quic-go calls connContext from its
// packet loop, AfterFunc and Admit from any goroutine.
type pendingGate struct {
	max     int64
	log     *slog.Logger
	pending atomic.Int64
	refused atomic.Int64
	lastLog atomic.Int64 // unix nanoseconds of the last refusal logged

	mu sync.Mutex // guards recent
	// recent holds the source addresses refused within refusalWindow. A
	// client's first flight can span several Initial packets (a post-
	// quantum ClientHello does not fit in one), and each reaches
	// connContext on its own because the first one created no
	// connection: counting them all would count one attempt two or three
	// times.
	recent map[string]time.Time
}

const (
	// refusalLogEvery keeps a flood from flooding the log too.
	refusalLogEvery = 10 * time.Second
	// refusalWindow: refusals of one address this close together are one attempt.
	refusalWindow = time.Second
	// maxRecentRefusals bounds recent. Under load only addresses that
	// answered a Retry get this far, so spoofed ones cannot fill it.
	maxRecentRefusals = 1024
)

// pendingSlot is one inbound connection's place under the cap.
type pendingSlot struct {
	gate *pendingGate
	once sync.Once
}

type pendingSlotKey struct{}

// connContext is the quic.Transport's ConnContext hook, called for each
// new inbound connection before quic-go spends anything on its handshake.
// An error makes quic-go answer CONNECTION_REFUSED. ctx ends when the
// connection closes or its handshake fails, which gives the place back.
func (g *pendingGate) connContext(ctx context.Context, ci *quic.ClientInfo) (context.Context, error) {
	if g.pending.Add(1) > g.max {
		g.pending.Add(-1)
		g.refuse(ci.RemoteAddr)
		return nil, errTooManyPending
	}
	s := &pendingSlot{gate: g}
	// After an Admit this runs at close as a no-op; not stopping it
	// spares a race with a context that ends before AfterFunc returns.
	context.AfterFunc(ctx, s.release)
	return context.WithValue(ctx, pendingSlotKey{}, s), nil
}

// verifySource is the quic.Transport's VerifySourceAddress hook: once half
// the places are taken, new clients must first echo a Retry token, so a
// flood of Initials from spoofed addresses cannot hold places at all.
// Honest peers pay one extra round trip, and only while under load.
func (g *pendingGate) verifySource(net.Addr) bool {
	return g.pending.Load() >= (g.max+1)/2
}

func (g *pendingGate) refuse(remote net.Addr) {
	if !g.newAttempt(remote.String(), time.Now()) {
		return
	}
	n := g.refused.Add(1)
	now := time.Now().UnixNano()
	last := g.lastLog.Load()
	if now-last < int64(refusalLogEvery) || !g.lastLog.CompareAndSwap(last, now) {
		return
	}
	g.log.Warn("refusing inbound peer connections: too many are not admitted yet",
		"max", g.max, "remote", remote.String(), "refusedTotal", n)
}

// newAttempt reports whether a refusal of addr at now is a new attempt
// rather than another packet of one refused a moment ago.
func (g *pendingGate) newAttempt(addr string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if at, ok := g.recent[addr]; ok && now.Sub(at) < refusalWindow {
		return false
	}
	if g.recent == nil {
		g.recent = map[string]time.Time{}
	}
	if len(g.recent) >= maxRecentRefusals {
		for a, at := range g.recent {
			if now.Sub(at) >= refusalWindow {
				delete(g.recent, a)
			}
		}
		if len(g.recent) >= maxRecentRefusals {
			clear(g.recent) // all recent: a miscount beats unbounded memory
		}
	}
	g.recent[addr] = now
	return true
}

// release gives the place back; later calls do nothing.
func (s *pendingSlot) release() {
	s.once.Do(func() { s.gate.pending.Add(-1) })
}

// slotOf returns the place an inbound connection holds (nil for dialed ones).
func slotOf(qc *quic.Conn) *pendingSlot {
	s, _ := qc.Context().Value(pendingSlotKey{}).(*pendingSlot)
	return s
}
