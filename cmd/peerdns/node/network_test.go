package node

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// newNetwork starts a master and size-1 nodes joined by invite, and waits
// until every node is connected to every other.
func newNetwork(t *testing.T, size int) []*Node {
	t.Helper()
	master := newTestNode(t, t.TempDir())
	base := "http://" + master.AdminAddr()
	testutil.Eventually(t, 10*time.Second, func() error {
		if code, body := call(t, "GET", base+"/api/health?probe=readiness", ""); code != 200 {
			return fmt.Errorf("master not ready: %s", body)
		}
		return nil
	})
	nodes := []*Node{master}
	for i := 1; i < size; i++ {
		var inv struct{ Invite string }
		mustJSON(t, "POST", base+"/api/invites", "", 200, &inv)
		cfg := testConfig(t.TempDir())
		cfg.Join = inv.Invite
		n, err := Start(cfg, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Stop)
		nodes = append(nodes, n)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, n := range nodes {
			var peers []string
			mustJSON(t, "GET", "http://"+n.AdminAddr()+"/api/peers", "", 200, &peers)
			if len(peers) != size-1 {
				return fmt.Errorf("%s has %d peers", n.ID()[:8], len(peers))
			}
			// Connected is not yet joined: the node may write once its
			// ledger holds the op that made it a writer.
			var m struct{ Sidecar struct{ Writable bool } }
			mustJSON(t, "GET", "http://"+n.AdminAddr()+"/api/consensus/metrics", "", 200, &m)
			if !m.Sidecar.Writable {
				return fmt.Errorf("%s is not a writer yet", n.ID()[:8])
			}
		}
		return nil
	})
	return nodes
}

func consensusOn(t *testing.T, n *Node, domain string) messages.ConsensusState {
	var cs messages.ConsensusState
	mustJSON(t, "GET", "http://"+n.AdminAddr()+"/api/consensus/"+domain, "", 200, &cs)
	return cs
}

func entriesOn(t *testing.T, n *Node, domain string) []string {
	var es []messages.LedgerEntry
	mustJSON(t, "GET", "http://"+n.AdminAddr()+"/api/entries", "", 200, &es)
	var keys []string
	for _, e := range es {
		if strings.Contains(e.Key, ":"+domain+":") {
			keys = append(keys, e.Key)
		}
	}
	return keys
}

// allNodes waits until check passes on every node.
func allNodes(t *testing.T, nodes []*Node, check func(n *Node) error) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		for i, n := range nodes {
			if err := check(n); err != nil {
				return fmt.Errorf("node %d: %w", i, err)
			}
		}
		return nil
	})
}

func TestThreeNodeClaimConflictAndRemoval(t *testing.T) {
	nodes := newNetwork(t, 3)
	a, b := nodes[0], nodes[1]
	addDomain(t, "http://"+a.AdminAddr(), "shared.p2p", hashA)
	allNodes(t, nodes, func(n *Node) error {
		cs := consensusOn(t, n, "shared.p2p")
		if cs.Status != "resolved" || cs.ResolvedClaimant == nil || *cs.ResolvedClaimant != a.ID() || cs.ActivePeers != 3 || cs.MinVotes != 2 || cs.TotalVotes != 3 {
			return fmt.Errorf("consensus %+v", cs)
		}
		return nil
	})

	// Every node answers DNS for it with its own local IP.
	for _, n := range nodes {
		m := new(dns.Msg)
		m.SetQuestion("www.shared.p2p.", dns.TypeA)
		r, err := dns.Exchange(m, n.dns.Addr())
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || !strings.HasPrefix(r.Answer[0].(*dns.A).A.String(), "127.77.") {
			t.Fatalf("DNS on %s: %v %v", n.ID()[:8], r, err)
		}
	}

	// A second claimant loses and sees a conflict on its own node.
	addDomain(t, "http://"+b.AdminAddr(), "shared.p2p", hashB)
	testutil.Eventually(t, 30*time.Second, func() error {
		var ds []domainEntry
		mustJSON(t, "GET", "http://"+b.AdminAddr()+"/api/resolved-domains", "", 200, &ds)
		for _, d := range ds {
			if d.Domain == "shared.p2p" {
				if d.ConsensusStatus != "conflict" || d.IsOwner || !d.IsLocal || d.Hash != hashA {
					return fmt.Errorf("B sees %+v", d)
				}
				return nil
			}
		}
		return fmt.Errorf("B does not list shared.p2p")
	})
	var conf struct{ Conflicts []messages.P2PConflict }
	mustJSON(t, "GET", "http://"+b.AdminAddr()+"/api/p2p-domain-conflicts", "", 200, &conf)
	if len(conf.Conflicts) != 1 || conf.Conflicts[0].LocalHash != hashB || conf.Conflicts[0].ResolvedHash != hashA ||
		conf.Conflicts[0].ResolvedClaimant != a.ID() || conf.Conflicts[0].LocalClaimant != b.ID() || conf.Conflicts[0].HashPreference != "resolved" {
		t.Fatalf("conflicts on B = %+v", conf)
	}

	// The losing claimant removes: only its own entries go.
	if code, body := call(t, "POST", "http://"+b.AdminAddr()+"/api/remove-domain", `{"domain":"shared.p2p"}`); code != 200 {
		t.Fatalf("remove on B = %d %s", code, body)
	}
	allNodes(t, nodes, func(n *Node) error {
		keys := entriesOn(t, n, "shared.p2p")
		for _, k := range keys {
			if strings.Contains(k, b.ID()) && !strings.HasSuffix(k, ":"+a.ID()) || strings.HasPrefix(k, "claim:shared.p2p:"+b.ID()) {
				return fmt.Errorf("B's entry %s still there", k)
			}
		}
		// A's claim and the votes of A and C stay.
		if len(keys) < 3 {
			return fmt.Errorf("entries %v", keys)
		}
		if cs := consensusOn(t, n, "shared.p2p"); cs.Status != "resolved" {
			return fmt.Errorf("status %s", cs.Status)
		}
		return nil
	})

	// The resolved claimant removes: every peer drops its entries.
	if code, body := call(t, "POST", "http://"+a.AdminAddr()+"/api/remove-domain", `{"domain":"shared.p2p"}`); code != 200 {
		t.Fatalf("remove on A = %d %s", code, body)
	}
	allNodes(t, nodes, func(n *Node) error {
		if keys := entriesOn(t, n, "shared.p2p"); len(keys) != 0 {
			return fmt.Errorf("entries left: %v", keys)
		}
		if cs := consensusOn(t, n, "shared.p2p"); cs.Status != "no_claims" {
			return fmt.Errorf("status %s", cs.Status)
		}
		return nil
	})
}

func TestFiveNodesAgree(t *testing.T) {
	nodes := newNetwork(t, 5)
	for i, n := range nodes {
		addDomain(t, "http://"+n.AdminAddr(), fmt.Sprintf("n%d.p2p", i), hashA)
	}
	allNodes(t, nodes, func(n *Node) error {
		for i, owner := range nodes {
			cs := consensusOn(t, n, fmt.Sprintf("n%d.p2p", i))
			if cs.Status != "resolved" || *cs.ResolvedClaimant != owner.ID() || cs.MinVotes != 3 || cs.ActivePeers != 5 {
				return fmt.Errorf("n%d.p2p: %+v", i, cs)
			}
		}
		return nil
	})
}
