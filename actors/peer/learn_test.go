package peer

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// TestPeerListOfStrangersDialsNobody: a writer's peer list naming many
// ids that are not writers of the network, each with addresses of its
// choosing, must not make the node dial those addresses (a session with
// a non-writer is refused anyway, so every such dial would be traffic a
// lying writer aims at hosts of its choice) nor fill its address book.
// The node asks its ledger and counts what it turned away.
func TestPeerListOfStrangersDialsNobody(t *testing.T) {
	nodes := memMesh(t, "A", "B", "E")
	a, evil := nodes[0], nodes[2]
	before := diag(t, a).Summary
	const fakes = 100
	var list []messages.PeerInfo
	for i := range fakes {
		id, _ := identity.Generate()
		list = append(list, messages.PeerInfo{ID: id.ID(), Addrs: []string{
			fmt.Sprintf("127.0.0.1:%d", 30000+i), fmt.Sprintf("127.0.0.2:%d", 30000+i)}})
	}
	evil.sendFrameTo(a.id.ID(), &messages.Envelope{Kind: messages.KindPeers, Peers: list})
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := diag(t, a).Summary.LearnedNotWriters - before.LearnedNotWriters; n < fakes {
			return fmt.Errorf("%d of %d strangers turned away", n, fakes)
		}
		return nil
	})
	after := diag(t, a).Summary
	if d := after.ConnectionAttempts - before.ConnectionAttempts; d != 0 {
		t.Fatalf("the node made %d dial attempts after a list of strangers", d)
	}
	if after.KnownPeers != before.KnownPeers {
		t.Fatalf("known peers went from %d to %d after a list of strangers", before.KnownPeers, after.KnownPeers)
	}
}

// TestListedBeforeItsAdditionIsDialedOnceAWriter: a peer list names a
// peer before the op that makes it a writer reaches the node (as a
// joiner's inviter's list comes before the joiner's ledger syncs). It
// is not dialed then; once the op adds a writer the node asks its
// ledger again and takes the addresses that list named.
func TestListedBeforeItsAdditionIsDialedOnceAWriter(t *testing.T) {
	nodes := memMesh(t, "A", "B")
	a, b := nodes[0], nodes[1]
	dir := t.TempDir()
	xid, err := identity.LoadOrCreate(filepath.Join(dir, "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	const listed = "127.0.0.9:7" // nobody listens there: only the list names it
	before := diag(t, a).Summary.LearnedNotWriters
	b.sendFrameTo(a.id.ID(), &messages.Envelope{Kind: messages.KindPeers, Peers: []messages.PeerInfo{
		{ID: xid.ID(), Addrs: []string{listed}}, {ID: b.id.ID()}}})
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := diag(t, a).Summary.LearnedNotWriters; n <= before {
			return errors.New("X not turned away yet")
		}
		return nil
	})
	newTestNode(t, "X", nodeOpts{mem: a.opts.mem, join: b.invite(0), dir: dir})
	// A dials the listed address (and fails) or, when X's session came
	// up first, keeps it in X's entry; without asking again it does
	// neither.
	testutil.Eventually(t, 15*time.Second, func() error {
		d := diag(t, a)
		for _, i := range d.ConnectionIssues {
			if i.Kind == "dial" && i.PeerID == xid.ID() && i.Addr == listed {
				return nil
			}
		}
		for _, p := range d.Peers {
			if p.ID == xid.ID() && slices.Contains(p.Addrs, listed) {
				return nil
			}
		}
		return fmt.Errorf("A neither dialed X at %s, the address the early list named, nor holds it", listed)
	})
}
