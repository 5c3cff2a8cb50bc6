package peer

import (
	"fmt"
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
