package scale

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// partition splits the simulated network in two: while split, no
// connection crosses from one side to the other (dials fail, inbound
// connections are closed: linkedEndpoint asks joined) and the
// connections that crossed are closed at the split (sim.split), as
// sessions end when their pings go unanswered (here at once rather than
// after the ping timeout). heal lets them dial again. The zero value is
// whole; a nil *partition is always whole.
type partition struct {
	mu   sync.Mutex
	side func(i int) int // nil: whole
}

// joined reports whether nodes i and j can reach each other now.
func (p *partition) joined(i, j int) bool {
	if p == nil {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.side == nil || p.side(i) == p.side(j)
}

// split puts node i on side(i) and closes every connection across. A
// connection made while this runs is closed by the check its dialer and
// acceptor make once it is up (linkedEndpoint.allowed).
func (s *sim) split(side func(i int) int) {
	s.part.mu.Lock()
	s.part.side = side
	s.part.mu.Unlock()
	for _, a := range s.nodes {
		for _, b := range s.nodes {
			if side(a.i) != side(b.i) {
				a.ep.CloseTo(b.id.ID(), "partitioned")
			}
		}
	}
}

// heal makes the network whole again.
func (p *partition) heal() {
	p.mu.Lock()
	p.side = nil
	p.mu.Unlock()
}

// verdict is one node's answer for one domain.
type verdict struct {
	status, claimant string
	active, votes    int
}

func (v verdict) String() string {
	return fmt.Sprintf("%s %.8s (%d votes of %d active)", v.status, v.claimant, v.votes, v.active)
}

// verdicts is node n's consensus on each of domains.
func (s *sim) verdicts(n *simNode, domains []string) []verdict {
	out := make([]verdict, len(domains))
	for k, d := range domains {
		r := ask[*messages.GetConsensusReply](s.tb, n, n.ledger, &messages.GetConsensus{Domain: d})
		if r.Err != nil {
			s.tb.Fatalf("node %d: consensus of %s: %v", n.i, d, r.Err)
		}
		v := verdict{status: r.State.Status, active: r.State.ActivePeers, votes: r.State.TotalVotes}
		if r.State.ResolvedClaimant != nil {
			v.claimant = *r.State.ResolvedClaimant
		}
		out[k] = v
	}
	return out
}

// waitAlike polls until every node gives every domain the same verdict
// (status and claimant) with all r replicas of each counted active and
// every one's vote counted, and returns how long that took; what still
// differed fails the test after within. The votes make the agreement
// final: without them every node could agree on insufficient_quorum
// for a moment, before the replicas across a healed cut have voted.
func (s *sim) waitAlike(domains []string, r int, within time.Duration) time.Duration {
	start := time.Now()
	testutil.Eventually(s.tb, within, func() error {
		first := s.verdicts(s.nodes[0], domains)
		var diff []string
		var short []*simNode // nodes counting a replica out
		for _, nd := range s.nodes {
			got := first
			if nd.i > 0 {
				got = s.verdicts(nd, domains)
			}
			for k, v := range got {
				if v.active != r {
					diff = append(diff, fmt.Sprintf("node %d counts %d of %d replicas of %s active", nd.i, v.active, r, domains[k]))
					if len(short) == 0 || short[len(short)-1] != nd {
						short = append(short, nd)
					}
				} else if v.votes != r {
					diff = append(diff, fmt.Sprintf("node %d counts %d of %d votes for %s", nd.i, v.votes, r, domains[k]))
				} else if v.status != first[k].status || v.claimant != first[k].claimant {
					diff = append(diff, fmt.Sprintf("%s: node 0 %v, node %d %v", domains[k], first[k], nd.i, v))
				}
			}
		}
		if len(diff) > 0 {
			sort.Strings(diff)
			time.Sleep(500 * time.Millisecond)
			return fmt.Errorf("the nodes disagree in %d places, e.g. %s%s", len(diff), strings.Join(diff[:min(len(diff), 8)], "; "), s.lastLines(short[:min(len(short), 2)], 40))
		}
		return nil
	})
	return time.Since(start)
}

// lastLines is the last n lines each of nodes logged (when kept), for a
// failure to show what they went through.
func (s *sim) lastLines(nodes []*simNode, n int) string {
	var b strings.Builder
	for _, nd := range nodes {
		if nd.log == nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(nd.log.String()), "\n")
		fmt.Fprintf(&b, "\nnode %d (%.16s), its last lines:\n  %s", nd.i, nd.id.ID(), strings.Join(lines[max(0, len(lines)-n):], "\n  "))
	}
	return b.String()
}

// kill stops node n at once: its endpoint first, so its peers see every
// connection close with no goodbye, then its actors and stores. (The
// ledger commits before it acknowledges, so, as with kill -9 of a
// process, no acknowledged write is lost.)
func (s *sim) kill(n *simNode) {
	_ = n.ep.Close()
	_ = n.sys.Root.StopFuture(n.peers).Wait()
	_ = n.sys.Root.StopFuture(n.ledger).Wait()
	n.sys.Shutdown()
	n.ldb.Close()
	n.ndb.Close()
}

// restart brings a killed node back over its stores, on a new address:
// it has no bootstrap and finds its peers in its address book, as a
// restarted process does.
func (s *sim) restart(n *simNode, cfg simConfig) *simNode {
	m := s.openNode(n.i, n.id, n.dir, n.replicas)
	m.log = n.log
	s.nodes[n.i] = m
	s.startPeers(m, cfg, nil)
	return m
}

// names is the domains claim(_, count, prefix) made.
func names(prefix string, count int) []string {
	out := make([]string, count)
	for k := range out {
		out[k] = fmt.Sprintf("%s%05d.p2p", prefix, k)
	}
	return out
}

// TestVirtualKillsAndPartition: 20 writers beyond R (R = 8 here, so each
// domain has its own replica set of 8 among the 20, and the overlay's
// views of 12 are not a full mesh), in virtual time, through what the
// fifty-process run does to real processes:
//
//   - three nodes are killed, node 0 claims domains while they are down,
//     and they come back on new addresses, finding their peers in their
//     address books;
//   - the network splits 9 | 11; each side claims domains of its own and
//     both sides claim the same domains (conflicts), each side's replicas
//     voting for the claimant they see; then it heals.
//
// After each, every node must hold every op and give every domain the
// same verdict (status and claimant), counted with the whole replica set
// active: every node computes alike from the same membership, so where a
// domain ends up may not depend on which node is asked.
// SCALE_PART_NODES and SCALE_PART_R change the sizes (30 and the default
// R of 24 is the fifty-process bench's 30-node case).
func TestVirtualKillsAndPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 20 nodes")
	}
	virtual(t, func(t *testing.T) {
		n, r, claims := envInt("SCALE_PART_NODES", 20), envInt("SCALE_PART_R", 8), 6
		cfg := simConfig{nodes: n, boot: 3, replicas: r}
		s := startSim(t, cfg)
		if took, full := s.waitViews(viewTarget(n), time.Minute); full != n {
			t.Fatalf("%d of %d views full after %v:%s", full, n, took, s.shortViews(viewTarget(n)))
		}

		// Kills.
		victims := []int{3, n / 2, n - 2}
		for _, i := range victims {
			s.kill(s.nodes[i])
		}
		w := s.nodes[0]
		seq := s.claim(w, claims, "gone")
		time.Sleep(5 * time.Second)
		back := time.Now()
		for _, i := range victims {
			s.restart(s.nodes[i], cfg)
		}
		s.waitApplied(w.id.ID(), seq, time.Minute)
		caught := time.Since(back)
		alikeKill := s.waitAlike(names("gone", claims), r, 2*time.Minute) + caught

		// A partition, 9 | 11 at 20 nodes.
		side := func(i int) int {
			if i < n*9/20 {
				return 0
			}
			return 1
		}
		// Long enough for each side to count the other out (heartbeats
		// time out after 3 s).
		applied, alike, tally := partitionAndHeal(t, s, r, claims, side, 10*time.Second)
		t.Logf("%d writers, R = %d, virtual time: 3 killed and restarted: every op on every node %v, every verdict alike %v after the restarts; a partition healed: every op on every node %v, every verdict alike %v after the heal (verdicts by prefix %v)",
			n, r, caught, alikeKill, applied, alike, tally)
	})
}

// TestVirtualLongPartitionHeals: 40 writers beyond R split 20 | 20,
// for two minutes and for eleven. Each side is larger than a view, so
// both refill their views from their own side within seconds, and every
// dialer of a peer across the cut retires (held back 30 s by a full
// view): after the heal nothing dials across unless a writer suspected
// that long counts as cut off. Eleven minutes outlast the heartbeat
// timeout (3 × 5 s × 41 ≈ 10 min here, hours at 1,000 writers): the
// suspicions of the partition's start have expired and the other side's
// heartbeats are too old to cross, so its writers count again only once
// they refute the suspicions of them as writers no longer (or never)
// heard, or a bridge's greeting carries a heartbeat of theirs that
// refutes them, and that heartbeat crosses the whole side. Every
// op must reach every node and every verdict agree within healBound of
// the heal, not a heartbeat interval later. SCALE_PART_HOLD sets the
// minutes (one run instead of both), SCALE_LONGPART_NODES the writers.
func TestVirtualLongPartitionHeals(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 40 nodes")
	}
	holds := []int{2, 11}
	if m := envInt("SCALE_PART_HOLD", 0); m > 0 {
		holds = []int{m}
	}
	for _, m := range holds {
		hold := time.Duration(m) * time.Minute
		t.Run(fmt.Sprint(hold), func(t *testing.T) {
			virtual(t, func(t *testing.T) {
				n, r, claims := envInt("SCALE_LONGPART_NODES", 40), 8, 6
				s := startSim(t, simConfig{nodes: n, boot: 3, replicas: r})
				if took, full := s.waitViews(viewTarget(n), time.Minute); full != n {
					t.Fatalf("%d of %d views full after %v:%s", full, n, took, s.shortViews(viewTarget(n)))
				}
				side := func(i int) int { return i % 2 }
				applied, alike, tally := partitionAndHeal(t, s, r, claims, side, hold)
				t.Logf("%d writers, R = %d, virtual time, a partition into halves for %v healed: every op on every node %v, every verdict alike %v after the heal (verdicts by prefix %v)",
					n, r, hold, applied, alike, tally)
				if alike > healBound {
					t.Errorf("verdicts alike %v after the heal, want within %v", alike, healBound)
				}
			})
		})
	}
}

// healBound is how soon after a long partition's heal every verdict must
// agree: a few overlay round trips, far below a heartbeat interval (205
// s at 40 writers).
const healBound = 15 * time.Second

// partitionAndHeal splits the network by side, lets each side count the
// other out, has the first node of side 0 and the last of side 1 claim
// domains of their own and the same domains, waits hold, checks no
// session crosses the cut, heals, and waits until every node holds both
// claimants' ops (how long: applied) and every domain's verdict is alike
// on every node (alike, counted from the heal). tally counts node 0's
// verdicts by name prefix and status.
func partitionAndHeal(t *testing.T, s *sim, r, claims int, side func(int) int, hold time.Duration) (applied, alike time.Duration, tally map[string]int) {
	t.Helper()
	s.split(side)
	time.Sleep(10 * time.Second)
	var left, right *simNode
	for _, nd := range s.nodes {
		if side(nd.i) == 0 && left == nil {
			left = nd
		}
		if side(nd.i) == 1 {
			right = nd
		}
	}
	s.claim(left, claims, "left")
	s.claim(right, claims, "right")
	s.claim(left, claims, "both")
	s.claim(right, claims, "both")
	time.Sleep(hold)
	for _, nd := range s.nodes {
		for _, id := range s.peersOf(nd) {
			if side(s.meter.index[id]) != side(nd.i) {
				t.Fatalf("node %d has a session across the partition", nd.i)
			}
		}
	}

	s.part.heal()
	healed := time.Now()
	domains := append(append(names("left", claims), names("right", claims)...), names("both", claims)...)
	s.waitApplied(left.id.ID(), s.vv(left)[left.id.ID()], time.Minute)
	s.waitApplied(right.id.ID(), s.vv(right)[right.id.ID()], time.Minute)
	applied = time.Since(healed)
	alike = s.waitAlike(domains, r, 2*time.Minute) + applied

	tally = map[string]int{}
	for k, v := range s.verdicts(s.nodes[0], domains) {
		tally[domains[k][:4]+" "+v.status]++
	}
	return applied, alike, tally
}

// envInt is $name as a positive integer, else def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
