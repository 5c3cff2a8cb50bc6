package peer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// entriesFor lists the live ledger entries (claims, votes) of domain on n.
func entriesFor(n *testNode, domain string) []string {
	var out []string
	for _, e := range ask[*messages.GetEntriesReply](n.t, n.sys, n.ledger, &messages.GetEntries{}).Entries {
		if strings.Contains(e.Key, ":"+domain+":") {
			out = append(out, e.Key)
		}
	}
	return out
}

// conflictOn starts three nodes A, B and C on which A claims name and
// then B claims it too: A's earlier claim keeps winning everywhere and B
// sees a conflict.
func conflictOn(t *testing.T, name string) (a, b *testNode, nodes []*testNode) {
	t.Helper()
	a = newTestNode(t, "A", nodeOpts{})
	b = joinNode(t, "B", a)
	c := joinNode(t, "C", a)
	nodes = []*testNode{a, b, c}
	waitMesh(t, 15*time.Second, nodes...)

	a.addDomain(name, hash('a'))
	waitConverged(t, 15*time.Second, nodes...)
	b.addDomain(name, hash('b'))
	waitConverged(t, 15*time.Second, nodes...)
	testutil.Eventually(t, 15*time.Second, func() error {
		for _, n := range nodes {
			d := n.domains()[name]
			if d.ConsensusState == nil || d.ConsensusState.Status != "resolved" || d.Hash != hash('a') {
				return fmt.Errorf("%s: %+v hash %s", n.name, d.ConsensusState, d.Hash)
			}
		}
		if s := b.domains()[name].ConsensusStatus; s != "conflict" {
			return fmt.Errorf("B consensusStatus %q, want conflict", s)
		}
		return nil
	})
	return a, b, nodes
}

func TestConflictAndBothRemoveCases(t *testing.T) {
	a, b, nodes := conflictOn(t, "x.p2p")
	conf := ask[*messages.GetP2PConflictsReply](t, b.sys, b.ledger, &messages.GetP2PConflicts{}).Conflicts
	if len(conf) != 1 || conf[0].Domain != "x.p2p" || conf[0].LocalHash != hash('b') || conf[0].ResolvedClaimant != a.id.ID() {
		t.Fatalf("B conflicts = %+v", conf)
	}

	// The losing claimant removes: only its own entries go, everywhere.
	if r := ask[*messages.RemoveDomainReply](t, b.sys, b.ledger, &messages.RemoveDomain{Domain: "x.p2p"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	waitConverged(t, 15*time.Second, nodes...)
	testutil.Eventually(t, 15*time.Second, func() error {
		for _, n := range nodes {
			es := entriesFor(n, "x.p2p")
			for _, k := range es {
				if strings.HasPrefix(k, "claim:x.p2p:"+b.id.ID()) {
					return fmt.Errorf("%s still has B's claim", n.name)
				}
			}
			if d := n.domains()["x.p2p"]; d.ConsensusState == nil || d.ConsensusState.Status != "resolved" || d.Hash != hash('a') {
				return fmt.Errorf("%s lost A's resolution: %+v", n.name, d.ConsensusState)
			}
		}
		return nil
	})

	// The resolved claimant removes: every peer drops all claims and votes.
	if r := ask[*messages.RemoveDomainReply](t, a.sys, a.ledger, &messages.RemoveDomain{Domain: "x.p2p"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, n := range nodes {
			if es := entriesFor(n, "x.p2p"); len(es) != 0 {
				return fmt.Errorf("%s still has %v", n.name, es)
			}
			if _, ok := n.domains()["x.p2p"]; ok {
				return fmt.Errorf("%s still lists x.p2p", n.name)
			}
		}
		return nil
	})
}

// The resolved claimant's remove reaches peers as one batch (its
// cleanup request with the deletion of its own entries): every peer
// then drops its own claim and votes, so a losing claim that was still
// live goes too and nobody takes the domain over.
func TestResolvedClaimantRemoveCleansUpLiveConflicts(t *testing.T) {
	a, _, nodes := conflictOn(t, "y.p2p")
	if r := ask[*messages.RemoveDomainReply](t, a.sys, a.ledger, &messages.RemoveDomain{Domain: "y.p2p"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, n := range nodes {
			if es := entriesFor(n, "y.p2p"); len(es) != 0 {
				return fmt.Errorf("%s still has %v", n.name, es)
			}
		}
		return nil
	})
}
