package peer

import (
	"fmt"
	"testing"

	"peerdns/messages"
)

// TestRelayNotesStayWithinSessionsAndKnownPeers: what a peer says it is
// connected to is kept only for peers we know, only while its session
// lasts, and a note from a session already gone is not taken: a peer
// listing made-up ids, or many peers coming and going, cannot grow it.
func TestRelayNotesStayWithinSessionsAndKnownPeers(t *testing.T) {
	a := &Actor{sessions: map[string]*sessionEntry{"n1": {up: true}},
		known: map[string]*knownPeer{"k1": {}, "k2": {}}}
	list := []messages.PeerInfo{{ID: "k1"}, {ID: "k2"}}
	for i := range 5000 {
		list = append(list, messages.PeerInfo{ID: fmt.Sprintf("made-up-%d", i)})
	}
	a.relayLearned("n1", list)
	if got := a.relays.reaches["n1"]; len(got) != 2 || !got["k1"] || !got["k2"] {
		t.Fatalf("n1's note: %d ids, want the 2 known ones", len(got))
	}
	a.relayLearned("gone", list)
	if _, ok := a.relays.reaches["gone"]; ok {
		t.Fatal("a note taken from a peer with no session")
	}
	a.relayDown("n1")
	if len(a.relays.reaches) != 0 {
		t.Fatalf("%d notes left after the session ended", len(a.relays.reaches))
	}
}
