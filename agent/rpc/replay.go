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

// maxPeerNonces bounds the nonces of one peer (273 calls a second over
// the window): a peer past it is refused (503) alone, so one allowed key
// of any role calling as fast as it can does not fill maxNonces and lock
// the others, admins included, out for the window.
const maxPeerNonces = maxNonces / 8

// replayGuard remembers the nonces seen within the window, per peer.
type replayGuard struct {
	mu     sync.Mutex
	seen   map[string]seenNonce // peer + "\x00" + nonce
	peers  map[string]int       // nonces held per peer
	sweep  time.Time
	window time.Duration
}

type seenNonce struct {
	exp  time.Time
	peer string
}

func newReplayGuard(window time.Duration) *replayGuard {
	return &replayGuard{seen: map[string]seenNonce{}, peers: map[string]int{}, window: window}
}

// replayResult is the verdict on one request.
type replayResult int

const (
	replayOK replayResult = iota
	replayStale
	replaySeen
	replayFull
)

// check records peer's nonce and says whether the request may run.
func (g *replayGuard) check(peer string, nonce []byte, sent, now time.Time) replayResult {
	if d := now.Sub(sent); d > g.window || d < -g.window {
		return replayStale
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.After(g.sweep) {
		for k, s := range g.seen {
			if now.After(s.exp) {
				delete(g.seen, k)
				if g.peers[s.peer]--; g.peers[s.peer] <= 0 {
					delete(g.peers, s.peer)
				}
			}
		}
		g.sweep = now.Add(g.window / 4)
	}
	k := peer + "\x00" + string(nonce)
	if s, ok := g.seen[k]; ok {
		if !now.After(s.exp) {
			return replaySeen
		}
		delete(g.seen, k) // expired, not swept yet
		g.peers[peer]--
	}
	if len(g.seen) >= maxNonces || g.peers[peer] >= maxPeerNonces {
		return replayFull
	}
	g.seen[k] = seenNonce{exp: now.Add(2 * g.window), peer: peer}
	g.peers[peer]++
	return replayOK
}
