package peer

import (
	"slices"
	"strings"
	"time"
)

// Introductions that come to nothing wait longer.
//
// A pair that cannot punch (both behind NATs that give every destination
// a new port, or filters that drop what they did not ask for) stays
// relayed or unconnected, and asked for an introduction every
// introMaxGap for as long as it lasted. Each one has both sides punch:
// QUIC dials that retransmit their padded first packet (1,200 bytes or
// more) for punchAttempt, punchTries times an address. Measured between
// two symmetric NATs (bench/natlab, TestIntroTraffic): 8 punch dials a
// minute and 78 KB a minute from one router towards the other (1.3 KB/s
// one way), without end: tens of KB/s to no use for a node at home with
// a few dozen peers behind carrier-grade NATs.
//
// So introductions asked for one peer are followed (introFruitless)
// until a direct session with it comes up: for introPatience they go at
// the usual pace (doubling from introDelay to introMaxGap, so about a
// dozen), then the wait before the next doubles from introMaxGap up to
// introLongGap (an hour asks about 20 times instead of 120; measured
// over minutes 5-16 of the same pair: 16 punch dials instead of 88, 157
// KB instead of 850). Five minutes, so a relayed pair whose routers
// start letting punches through soon after it met still gets punched
// within minutes (cmd/peerdns's TestReachRelayedPairPunchesLater).
//
// The following starts again when the addresses an introduction would
// punch change, on either side (ours: advertise, which holds the
// addresses our peers agree they see us at; the peer's: what we know of
// it): a node that moved, or a router that was given a port mapping,
// is worth punching again at once. libp2p's hole punching (DCUtR) gives
// up after three attempts on a relayed connection; a pair here keeps
// trying, seldom, because a NAT's behaviour can change under it.
const (
	introPatience = 5 * time.Minute
	introLongGap  = 10 * time.Minute
)

// introFruitless follows the introductions asked for one peer since we
// last had a direct session with it, for the addresses in where.
type introFruitless struct {
	where string
	since time.Time // the first one asked
	last  time.Time // the last one asked
	late  int       // asked past introPatience
	next  time.Time // no introduction asked for before then
}

// introWhere names the addresses an introduction between us and id
// would punch, each side's as a set; a change starts the count again.
func (a *Actor) introWhere(id string) string {
	ours := slices.Sorted(slices.Values(a.advertise()))
	var theirs []string
	if k := a.known[id]; k != nil {
		theirs = slices.Sorted(slices.Values(k.Addrs))
	}
	return strings.Join(ours, ",") + "|" + strings.Join(theirs, ",")
}

// introWaits reports whether an introduction to id must wait because
// those before it came to nothing. Called before asking.
func (a *Actor) introWaits(id string, now time.Time) bool {
	f := a.reach.fruitless[id]
	if f == nil {
		return false
	}
	if f.where != a.introWhere(id) {
		delete(a.reach.fruitless, id)
		return false
	}
	return now.Before(f.next)
}

// introAsked notes an introduction asked for id and sets when the next
// may be.
func (a *Actor) introAsked(id string, now time.Time) {
	r := a.reach
	f := r.fruitless[id]
	if f == nil {
		f = &introFruitless{where: a.introWhere(id), since: now}
		r.fruitless[id] = f
	}
	f.last = now
	if now.Sub(f.since) < introPatience {
		return
	}
	f.late++
	gap := introMaxGap
	for i := 0; i < f.late && gap < introLongGap; i++ {
		gap *= 2
	}
	f.next = now.Add(min(gap, introLongGap))
}

// pruneFruitless forgets the counts of peers we no longer know, and of
// those no introduction was asked for in twice introLongGap (no longer
// sought: a later search starts afresh).
func (a *Actor) pruneFruitless(now time.Time) {
	for id, f := range a.reach.fruitless {
		if a.known[id] == nil || now.Sub(f.last) > 2*introLongGap {
			delete(a.reach.fruitless, id)
		}
	}
}
