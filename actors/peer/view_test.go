package peer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
)

// overlayHeal bounds how long an overlay test waits for every node to
// hold every op. A small view can split the graph for a while (a set of
// full views with no link out): it heals once the other side's
// heartbeats time out and the peers that sent it away are no longer held
// off (leaveHold, 30 s), so the bound is above that.
const overlayHeal = 45 * time.Second

// overlayNet starts n nodes on one in-memory network, each with an active
// view of view, all joined through the first (so the first is asked to
// make room again and again).
func overlayNet(t *testing.T, n, view int) []*testNode {
	t.Helper()
	return overlayNetWith(t, n, view, nil)
}

// overlayNetWith is overlayNet with a hook that adjusts node i's options.
func overlayNetWith(t *testing.T, n, view int, adjust func(i int, o *nodeOpts)) []*testNode {
	t.Helper()
	mem := transport.NewMemNetwork()
	o := nodeOpts{mem: mem, activeView: view, heartbeat: 100 * time.Millisecond, heartbeatTimeout: 1500 * time.Millisecond}
	opts := func(i int) nodeOpts {
		oi := o
		if adjust != nil {
			adjust(i, &oi)
		}
		return oi
	}
	nodes := []*testNode{newTestNode(t, "N0", opts(0))}
	nodes[0].waitReady()
	for i := 1; i < n; i++ {
		inv := nodes[0].invite(0)
		oi := opts(i)
		oi.join = inv
		nd := newTestNode(t, fmt.Sprintf("N%d", i), oi)
		testutil.Eventually(t, 30*time.Second, func() error {
			if !nd.isWriter(nd.id.ID()) {
				return fmt.Errorf("%s not a writer yet", nd.name)
			}
			return nil
		})
		nodes = append(nodes, nd)
	}
	return nodes
}

// waitOverlay waits until every node has between 1 and view neighbours
// and the neighbour graph is connected.
func waitOverlay(t *testing.T, within time.Duration, view int, nodes ...*testNode) {
	t.Helper()
	byID := map[string]*testNode{}
	for _, n := range nodes {
		byID[n.id.ID()] = n
	}
	testutil.Eventually(t, within, func() error {
		adj := map[string][]string{}
		for _, n := range nodes {
			d := diag(t, n)
			var up []string
			for _, p := range d.Peers {
				if p.State == "connected" {
					up = append(up, p.ID)
				}
			}
			if len(up) == 0 || len(up) > view {
				return fmt.Errorf("%s has %d neighbours, want 1..%d", n.name, len(up), view)
			}
			adj[n.id.ID()] = up
		}
		seen := map[string]bool{nodes[0].id.ID(): true}
		queue := []string{nodes[0].id.ID()}
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			for _, o := range adj[id] {
				if !seen[o] && byID[o] != nil {
					seen[o] = true
					queue = append(queue, o)
				}
			}
		}
		if len(seen) != len(nodes) {
			return fmt.Errorf("neighbour graph reaches %d of %d nodes", len(seen), len(nodes))
		}
		return nil
	})
}

func TestBoundedActiveViewKeepsGraphConnected(t *testing.T) {
	const n, view = 7, 3
	nodes := overlayNet(t, n, view)
	waitOverlay(t, overlayHeal, view, nodes...)

	// Ops still reach every node though no node talks to all: claims
	// made on two nodes far apart converge everywhere.
	nodes[1].addDomain("far-one.p2p", hash('1'))
	nodes[n-1].addDomain("far-two.p2p", hash('2'))
	waitConverged(t, overlayHeal, nodes...)
	for _, nd := range nodes {
		ds := nd.domains()
		for _, name := range []string{"far-one.p2p", "far-two.p2p"} {
			if _, ok := ds[name]; !ok {
				t.Fatalf("%s lacks %s", nd.name, name)
			}
		}
	}
	left := int64(0)
	for _, nd := range nodes {
		left += diag(t, nd).Summary.Overlay.LeavesSent
	}
	if left == 0 {
		t.Fatal("no node ever dropped a neighbour, yet 7 nodes joined one node with a view of 3")
	}
}

// A full-mesh network (no more nodes than the view holds) never sends a
// leave: every node keeps every other, as before there was a view.
func TestSmallNetworkStaysFullMesh(t *testing.T) {
	nodes := overlayNet(t, 4, 4)
	waitMesh(t, 20*time.Second, nodes...)
	for _, nd := range nodes {
		if o := diag(t, nd).Summary.Overlay; o.LeavesSent != 0 || o.LeavesReceived != 0 {
			t.Fatalf("%s overlay %+v: a full mesh dropped a neighbour", nd.name, o)
		}
	}
}

func TestShuffleSampleGarbageIgnoredAndCounted(t *testing.T) {
	nodes := overlayNet(t, 2, 4)
	a, b := nodes[0], nodes[1]
	waitMesh(t, 10*time.Second, a, b)
	good := strings.Repeat("ab", 32)
	sample := []messages.PeerInfo{
		{ID: "not-an-id", Addrs: []string{"127.0.0.1:1"}},                  // bad id: whole entry
		{ID: good, Addrs: []string{"nowhere", "127.0.0.1:9", "0.0.0.0:1"}}, // two bad addresses
	}
	a.sendFrameTo(b.id.ID(), &messages.Envelope{Kind: messages.KindShuffle, Overlay: &messages.Overlay{Sample: sample}})
	testutil.Eventually(t, 5*time.Second, func() error {
		if g := diag(t, b).Summary.Overlay.SampleGarbage; g != 3 {
			return fmt.Errorf("garbage = %d, want 3", g)
		}
		return nil
	})
	for _, p := range diag(t, b).Peers {
		if p.ID == "not-an-id" {
			t.Fatal("a bad id was remembered")
		}
		if p.ID == good && (len(p.Addrs) != 1 || p.Addrs[0] != "127.0.0.1:9") {
			t.Fatalf("good entry kept addresses %v, want only 127.0.0.1:9", p.Addrs)
		}
	}
	if got := b.peerIDs(); len(got) != 1 {
		t.Fatalf("the connection to A is gone after a garbage sample: %v", got)
	}
}

// sendFrameTo makes n send env to peer on their session as it is.
func (n *testNode) sendFrameTo(peer string, env *messages.Envelope) {
	n.sys.Root.Send(n.peers, &frameTo{peer: peer, env: env})
}

// Idle neighbours that hold the same ops exchange digests, never full
// vectors.
func TestIdleNeighboursSendDigestsOnly(t *testing.T) {
	nodes := overlayNet(t, 3, 4)
	waitMesh(t, 10*time.Second, nodes...)
	nodes[1].addDomain("digest.p2p", hash('d'))
	waitConverged(t, 10*time.Second, nodes...)
	waitEqual := func(n int64) *messages.OverlayDiag {
		start := diag(t, nodes[0]).Summary.Overlay.DigestsEqual
		var o *messages.OverlayDiag
		testutil.Eventually(t, 10*time.Second, func() error {
			if o = diag(t, nodes[0]).Summary.Overlay; o.DigestsEqual < start+n {
				return fmt.Errorf("digests matched %d times, want %d more than %d", o.DigestsEqual, n, start)
			}
			return nil
		})
		return o
	}
	settled := waitEqual(4)
	if later := waitEqual(8); later.DigestsDiffer != settled.DigestsDiffer {
		t.Fatalf("idle neighbours sent full vectors: %d digests differed after settling", later.DigestsDiffer-settled.DigestsDiffer)
	}
}
