package peer

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// A dialer that gave up on an address reports it after another dialer
// took the address (the address changed hands: a dialer for another peer
// started there meanwhile). The report drops its own dialer and the
// address from the peers that only heard of it, never the dialer that
// replaced it, nor the address from the peer that dialer works for.
func TestGaveUpDialerLeavesItsReplacement(t *testing.T) {
	r := newSessionsRig(t)
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	const addr = "192.0.2.7:7740"
	r.run(func(actor.Context) {
		if r.a.dialers == nil {
			r.a.dialers = map[string]*dialerEntry{}
		}
		r.a.known[a] = &knownPeer{Addrs: []string{addr}}
		r.a.known[b] = &knownPeer{Addrs: []string{addr, "192.0.2.8:7740"}}
		_, cancelOld := context.WithCancel(context.Background())
		old := &dialerEntry{cancel: cancelOld, id: a}
		ctx, cancel := context.WithCancel(context.Background())
		r.a.dialers[addr] = &dialerEntry{cancel: cancel, id: b}
		r.a.onDialGaveUp(&dialGaveUp{addr: addr, peer: a, e: old})
		if e := r.a.dialers[addr]; e == nil || e.id != b || ctx.Err() != nil {
			t.Errorf("the dialer for b at %s was dropped by a's dialer giving up", addr)
		}
		if k := r.a.known[b]; k == nil || !slices.Contains(k.Addrs, addr) {
			t.Errorf("b lost %s while its dialer works on it", addr)
		}
		if _, ok := r.a.known[a]; ok {
			t.Errorf("a, never seen and left with no address, is still known")
		}
		// Its own report drops it.
		r.a.onDialGaveUp(&dialGaveUp{addr: addr, peer: b, e: r.a.dialers[addr]})
		if r.a.dialers[addr] != nil || ctx.Err() == nil {
			t.Errorf("b's dialer was not dropped by its own report")
		}
		if k := r.a.known[b]; k == nil || slices.Contains(k.Addrs, addr) {
			t.Errorf("b kept %s after its dialer gave up on it", addr)
		}
	})
}
