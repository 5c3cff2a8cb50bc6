package rpc

import (
	"sync"
	"time"
)

// ReplayWindow is how far a request's time may be from the agent's clock,
// either way. A nonce is remembered for twice that long, so a request can
// be replayed neither inside the window (the nonce is known) nor after it
// (the time is out).
const ReplayWindow = 30 * time.Second

// maxNonces bounds the remembered nonces: past it, new requests are
// refused (status 503) until old nonces expire, instead of memory growing.
const maxNonces = 1 << 17

// replayGuard remembers the nonces seen within the window.
type replayGuard struct {
	mu     sync.Mutex
	seen   map[string]time.Time // nonce -> expiry
	sweep  time.Time
	window time.Duration
}

func newReplayGuard(window time.Duration) *replayGuard {
	return &replayGuard{seen: map[string]time.Time{}, window: window}
}

// replayResult is the verdict on one request.
type replayResult int

const (
	replayOK replayResult = iota
	replayStale
	replaySeen
	replayFull
)

// check records nonce and says whether the request may run.
func (g *replayGuard) check(nonce []byte, sent, now time.Time) replayResult {
	if d := now.Sub(sent); d > g.window || d < -g.window {
		return replayStale
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.After(g.sweep) {
		for k, exp := range g.seen {
			if now.After(exp) {
				delete(g.seen, k)
			}
		}
		g.sweep = now.Add(g.window / 4)
	}
	k := string(nonce)
	if exp, ok := g.seen[k]; ok && !now.After(exp) {
		return replaySeen
	}
	if len(g.seen) >= maxNonces {
		return replayFull
	}
	g.seen[k] = now.Add(2 * g.window)
	return replayOK
}
