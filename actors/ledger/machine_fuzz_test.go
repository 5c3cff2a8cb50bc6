package ledger

import (
	"fmt"
	"testing"
	"time"
)

// FuzzMachineAnswersEveryWaiter drives the scheduling machine with an
// arbitrary sequence of inputs (each byte pair picks an input and a
// domain; time moves on by a few milliseconds), then lets it come to
// rest as the actor would (rounds, every armed timer fired, every
// evaluation in flight answered). Every waiter must have been answered
// exactly once, and none before the publish that shows its domain; every
// queued claim committed exactly once, whatever order its timers fired
// in (a commit brought forward leaves a stale timer behind).
func FuzzMachineAnswersEveryWaiter(f *testing.F) {
	f.Add([]byte{2, 0, 4, 0, 6, 0, 5, 0})
	f.Add([]byte{0, 1, 2, 1, 3, 0, 4, 0, 1, 1, 4, 0, 5, 0, 5, 1})
	f.Add([]byte{8, 2, 3, 0, 4, 0, 9, 2, 4, 0, 6, 1, 7, 0, 10, 0})
	f.Add([]byte{0, 0, 0, 1, 0, 2, 4, 0, 6, 0, 6, 1, 6, 2, 7, 0, 2, 0, 2, 1, 4, 0, 5, 3})
	f.Add([]byte{11, 0, 5, 0, 11, 2, 11, 1, 11, 3, 5, 9, 11, 1, 11, 1, 11, 2, 5, 0, 5, 0, 11, 15, 5, 0})
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) > 400 {
			return
		}
		m := newMachine(DefaultClaimGap, DefaultVoteGap, DefaultEvalGap, publishGap)
		l := scriptLedger{}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var timers []Timer
		asked, answered := 0, map[int]int{}
		claims, committed := 0, map[string]int{}
		epoch := uint64(0)
		step := func(in any) Output {
			out := m.Step(in, now)
			timers = append(timers, out.Timers...)
			for _, c := range out.Claims {
				committed[c.name]++
			}
			if len(out.Replies) > 0 && !out.Publish {
				t.Fatalf("replies without a publish: %+v", out)
			}
			for _, r := range out.Replies {
				answered[r.(int)]++
			}
			return out
		}
		fire := func(k timerKind, gen uint64) {
			out := step(Fired{Kind: k, Gen: gen})
			if k == timerVotes && len(out.Commit) > 0 {
				// The actor signs the votes; applying them touches
				// their domains (a new version, our vote in).
				for _, d := range out.Commit {
					if dom, ok := l[d]; ok {
						l[d] = scriptDomain{version: dom.version + 1, claimed: dom.claimed}
					}
				}
				step(Touch{Domains: out.Commit})
				step(VotesCommitted{Domains: out.Commit})
			}
		}
		name := func(b byte) string { return fmt.Sprintf("d%d.p2p", b%4) }
		for i := 0; i+1 < len(script); i += 2 {
			op, d := script[i]%12, name(script[i+1])
			now = now.Add(time.Duration(script[i+1]%16) * time.Millisecond)
			switch op {
			case 0:
				l[d] = scriptDomain{version: l[d].version + 1, claimed: true, needVote: script[i+1]&16 != 0}
				step(Touch{Domains: []string{d}})
			case 1:
				delete(l, d)
				step(Touch{Domains: []string{d}})
			case 2:
				asked++
				step(Wait{Domains: []string{d}, Replies: []any{asked}})
			case 3:
				asked++
				step(Wait{Domains: []string{""}, Replies: []any{asked}})
			case 4:
				step(Round{Ledger: l, Epoch: epoch})
			case 5:
				if len(timers) > 0 {
					tm := timers[0]
					timers = timers[1:]
					fire(tm.Kind, tm.Gen)
				}
			case 6:
				for name, key := range m.inflight {
					if script[i+1]&2 != 0 {
						step(Stale{Domain: name})
					} else if script[i+1]&1 == 0 {
						step(Settled{Domain: name})
					} else {
						step(QueueVote{Domain: name, Key: key, Votes: []write{{key: name}}})
					}
					break
				}
			case 7:
				fire(timerVotes, 0)
			case 8:
				step(Recalc{Domains: []string{d}})
			case 9:
				step(Restarted{Domain: d})
			case 10:
				epoch++
				step(Changed{Now: script[i+1]&1 == 0})
			case 11:
				claims++
				step(QueueClaim{Claim: queuedClaim{name: fmt.Sprint(claims)}})
			}
		}
		// Come to rest as the actor does: a round after every message,
		// the timers fired, the evaluations answered.
		for round := 0; round < 50; round++ {
			now = now.Add(time.Second)
			step(Round{Ledger: l, Epoch: epoch})
			for name := range m.inflight {
				step(Settled{Domain: name})
			}
			pending := timers
			timers = nil
			for _, tm := range pending {
				fire(tm.Kind, tm.Gen)
			}
			if len(m.waiters) == 0 && len(timers) == 0 && len(m.inflight) == 0 && len(m.claimQueue) == 0 {
				break
			}
		}
		if len(m.waiters) > 0 {
			t.Fatalf("%d waiters never answered (in flight %v, dirty %v, deferred %v)", len(m.waiters), m.inflight, m.dirty, m.deferred)
		}
		for id := 1; id <= asked; id++ {
			if answered[id] != 1 {
				t.Fatalf("waiter %d answered %d times", id, answered[id])
			}
		}
		for id := 1; id <= claims; id++ {
			if n := committed[fmt.Sprint(id)]; n != 1 {
				t.Fatalf("claim %d committed %d times (%d still queued)", id, n, len(m.claimQueue))
			}
		}
	})
}
