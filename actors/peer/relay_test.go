package peer

import (
	"fmt"
	"testing"
	"time"

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

// TestRelayBackoffGoesWithForgottenPeers: the back-off kept for a peer
// that could not be relayed to goes once the peer is no longer known,
// and only then.
func TestRelayBackoffGoesWithForgottenPeers(t *testing.T) {
	a := &Actor{sessions: map[string]*sessionEntry{}, known: map[string]*knownPeer{"k1": {}}}
	a.relays.init()
	now := time.Unix(1000, 0)
	for _, id := range []string{"k1", "gone"} {
		a.relays.tries[id], a.relays.next[id], a.relays.missing[id] = 3, now, now
	}
	a.pruneRelays()
	if a.relays.tries["k1"] != 3 || a.relays.next["k1"] != now || a.relays.missing["k1"] != now {
		t.Fatal("a known peer's back-off dropped")
	}
	if _, ok := a.relays.tries["gone"]; ok || len(a.relays.next) != 1 || len(a.relays.missing) != 1 {
		t.Fatalf("a forgotten peer's back-off kept: %v %v %v", a.relays.tries, a.relays.next, a.relays.missing)
	}
}
