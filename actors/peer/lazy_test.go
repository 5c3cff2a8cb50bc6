package peer

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

func overlaySum(t *testing.T, nodes []*testNode, f func(*messages.OverlayDiag) int64) int64 {
	var n int64
	for _, nd := range nodes {
		n += f(diag(t, nd).Summary.Overlay)
	}
	return n
}

// A burst of claims on a bounded overlay with cycles: links that bring
// duplicates are pruned to lazy ones, and every node still gets every op.
// Bursts go on until a prune shows in diagnostics (sessions report their
// counters on their tick, and the overlay may still be reshaping), within
// overlayHeal.
func TestPlumtreePrunesDuplicateLinks(t *testing.T) {
	const n, view = 7, 3
	nodes := overlayNet(t, n, view)
	waitOverlay(t, overlayHeal, view, nodes...)
	prunes := func() int64 {
		return overlaySum(t, nodes, func(o *messages.OverlayDiag) int64 { return o.Prunes })
	}
	deadline := time.Now().Add(overlayHeal)
	for round := 0; prunes() == 0; round++ {
		if time.Now().After(deadline) {
			t.Fatalf("no link was pruned in %d bursts, though ops reached nodes twice", round)
		}
		for _, i := range []int{1, n - 2} {
			nodes[i].addDomain(fmt.Sprintf("burst-%d-%d.p2p", round, i), hash('b'))
		}
		waitConverged(t, overlayHeal, nodes...)
	}
	// After pruning, ops still reach everyone (eager tree plus lazy
	// repair).
	nodes[3].addDomain("after-prune.p2p", hash('c'))
	waitConverged(t, overlayHeal, nodes...)
}

// Nodes that relay nothing they did not write: their neighbours still
// get every op (lazy links and digests repair around them). With two
// withholders among six and a view of 2, a node whose both neighbours
// withhold happens about one run in three; it drops them once their
// vectors show ops it lacks and nothing arrives (session_owed.go), and
// takes neighbours that deliver. Without that it stayed cut off until a
// leave's hold (30 s) ran out, beyond this test's bound.
func TestWithholdingNeighbourRepaired(t *testing.T) {
	const n, view = 6, 2
	nodes := overlayNetWith(t, n, view, func(i int, o *nodeOpts) { o.withhold = i < 2 })
	waitOverlay(t, overlayHeal, view, nodes...)
	for i, nd := range nodes {
		nd.addDomain(fmt.Sprintf("from-%d.p2p", i), hash('e'))
	}
	waitConverged(t, 15*time.Second, nodes...)
}

// A neighbour that announces ids it never delivers, or far more ids than
// the rate allows, is dropped from the active view.
func TestIHaveFloodDropsNeighbour(t *testing.T) {
	for _, tt := range []struct {
		name   string
		frames int
		ids    int
		// held: every id announced is of an op B holds (A's first), so
		// B grafts nothing and only the rate can drop A
		held bool
		why  string
	}{
		{"undelivered", maxUndelivered/4 + 1, 4, false, "announced ops it does not deliver"},
		{"over the rate", 2*ihaveBurst/messages.MaxOpIDs + 2, messages.MaxOpIDs, true, "announces more op ids than allowed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			nodes := overlayNet(t, 2, 4)
			a, b := nodes[0], nodes[1]
			waitMesh(t, 10*time.Second, a, b)
			seq := uint64(1 << 40)
			for f := 0; f < tt.frames; f++ {
				ids := make([]messages.OpID, tt.ids)
				for i := range ids {
					seq++
					ids[i] = messages.OpID{Writer: a.id.ID(), Seq: seq}
					if tt.held {
						ids[i].Seq = 1 // the network's first op, which B joined on
					}
				}
				a.sendFrameTo(b.id.ID(), &messages.Envelope{Kind: messages.KindIHave, Overlay: &messages.Overlay{IDs: ids}})
			}
			testutil.Eventually(t, 10*time.Second, func() error {
				d := diag(t, b)
				if d.Summary.Overlay.LeavesSent == 0 {
					return fmt.Errorf("B kept the flooding neighbour: %+v", *d.Summary.Overlay)
				}
				for _, is := range d.ConnectionIssues {
					if is.Kind == "overlay" && is.PeerID == a.id.ID() {
						if !strings.Contains(is.Reason, tt.why) {
							t.Fatalf("A was dropped for %q, want %q", is.Reason, tt.why)
						}
						return nil
					}
				}
				return fmt.Errorf("no overlay issue recorded for A: %+v", d.ConnectionIssues)
			})
		})
	}
}

// A node takes pushes from at most EagerLinks neighbours from the start
// (the others announce ids to it), claims still reach every node, and a
// node whose feeds end asks another neighbour to push: without that it
// would hear of every op by announcement only, a LazyTimeout late.
func TestFeedsBoundedAndRefilled(t *testing.T) {
	const n, view, eager = 6, 5, 2
	// Grafts make links eager too: a long LazyTimeout keeps them out of
	// the counts (and out of the refill below, which then only the
	// replacement of ended feeds can bring).
	nodes := overlayNetWith(t, n, view, func(i int, o *nodeOpts) { o.eagerLinks, o.lazyTimeout = eager, time.Minute })
	waitOverlay(t, overlayHeal, view, nodes...)
	feedsOf := func(nd *testNode) []string {
		var ids []string
		for _, p := range diag(t, nd).Peers {
			if p.Feeds {
				ids = append(ids, p.ID)
			}
		}
		return ids
	}
	for _, nd := range nodes {
		if e := feedsOf(nd); len(e) > eager {
			t.Fatalf("%s takes pushes from %d neighbours, at most %d allowed", nd.name, len(e), eager)
		}
	}
	if lazy := overlaySum(t, nodes, func(o *messages.OverlayDiag) int64 { return int64(o.LazyLinks) }); lazy == 0 {
		t.Fatal("every link pushes: none was asked to announce")
	}
	nodes[1].addDomain("fed-1.p2p", hash('d'))
	nodes[4].addDomain("fed-4.p2p", hash('d'))
	waitConverged(t, overlayHeal, nodes...)

	// Stop every node that feeds node 0: its sessions to them end, and it
	// asks a neighbour left to push instead.
	stopped := map[string]bool{}
	for _, id := range feedsOf(nodes[0]) {
		stopped[id] = true
	}
	if len(stopped) == 0 {
		t.Fatal("node 0 has no feed to stop")
	}
	var left []*testNode
	for _, nd := range nodes {
		if stopped[nd.id.ID()] {
			nd.stop()
		} else {
			left = append(left, nd)
		}
	}
	testutil.Eventually(t, overlayHeal, func() error {
		e := feedsOf(nodes[0])
		for _, id := range e {
			if stopped[id] {
				return fmt.Errorf("node 0 still counts stopped %s as a feed", short(id))
			}
		}
		if len(e) == 0 {
			var st []string
			for _, p := range diag(t, nodes[0]).Peers {
				st = append(st, short(p.ID)+":"+p.State)
			}
			return fmt.Errorf("node 0 has no feed after its feeds stopped (peers %v)", st)
		}
		return nil
	})
	left[len(left)-1].addDomain("after-refill.p2p", hash('e'))
	waitConverged(t, overlayHeal, left...)
}

// Announced and grafted ids whose writer the receiver cannot resolve
// (messages.OpID decodes an unknown short writer as "") are ignored and
// counted: no graft for them, no repair, and the link stays up.
func TestUnknownAnnouncedIDsCounted(t *testing.T) {
	nodes := overlayNet(t, 2, 4)
	a, b := nodes[0], nodes[1]
	waitMesh(t, 10*time.Second, a, b)
	ids := []messages.OpID{{Seq: 7}, {Seq: 8}}
	a.sendFrameTo(b.id.ID(), &messages.Envelope{Kind: messages.KindIHave, Overlay: &messages.Overlay{IDs: ids}})
	a.sendFrameTo(b.id.ID(), &messages.Envelope{Kind: messages.KindGraft, Overlay: &messages.Overlay{IDs: ids[:1]}})
	testutil.Eventually(t, 10*time.Second, func() error {
		o := diag(t, b).Summary.Overlay
		if o.IDsUnknown != 3 {
			return fmt.Errorf("B counted %d unknown ids, want 3", o.IDsUnknown)
		}
		if o.Grafts != 0 {
			return fmt.Errorf("B grafted %d ids", o.Grafts)
		}
		return nil
	})
	// The link still carries ops both ways.
	a.addDomain("after-unknown.p2p", hash('d'))
	waitConverged(t, overlayHeal, a, b)
}

// A vote pushed live names its claimant by 8 bytes; a receiver that
// cannot resolve them (here: two known writers share them, which
// this process is made to believe of the claimant) drops the vote and
// counts it, and a repair, which sends ops whole, brings it: every node
// still ends with every vote.
func TestUnresolvedClaimantRepaired(t *testing.T) {
	nodes := overlayNet(t, 3, 4)
	waitMesh(t, 10*time.Second, nodes...)
	claimant := nodes[0]
	raw, err := hex.DecodeString(claimant.id.ID())
	if err != nil {
		t.Fatal(err)
	}
	raw[31] ^= 1 // a twin: the claimant's first 8 bytes, another key
	b, _ := messages.Marshal(&messages.Heartbeat{Writer: hex.EncodeToString(raw), Seq: 1, Sig: []byte{1}})
	if err := messages.Unmarshal(b, &messages.Heartbeat{}); err != nil {
		t.Fatal(err)
	}
	claimant.addDomain("twin-claimant.p2p", hash('d'))
	waitConverged(t, overlayHeal, nodes...)
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := overlaySum(t, nodes, func(o *messages.OverlayDiag) int64 { return o.IDsUnknown }); n == 0 {
			return fmt.Errorf("no vote was dropped for its claimant")
		}
		return nil
	})
	for _, nd := range nodes {
		if _, ok := nd.domains()["twin-claimant.p2p"]; !ok {
			t.Fatalf("%s does not have the domain", nd.name)
		}
	}
}
