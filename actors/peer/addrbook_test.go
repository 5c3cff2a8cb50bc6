package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"peerdns/internal/store"
	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
)

// TestPeersOwnAddressesOutrankHearsay: a writer's peer exchange fills
// A's address book entry for B with addresses B never had, as many as
// an entry holds. B then comes back at a new address: A's entry holds
// it, first (it dials known peers there after a restart), and the
// addresses nobody reached B at make room for it. (On the in-memory
// network: dials to the bogus addresses go nowhere.)
func TestPeersOwnAddressesOutrankHearsay(t *testing.T) {
	nodes := memMesh(t, "A", "B", "E")
	a, b, evil := nodes[0], nodes[1], nodes[2]
	conn := impersonateMem(t, evil, a)
	var bogus []string
	for i := range maxAddrsPerPeer {
		bogus = append(bogus, fmt.Sprintf("198.51.100.%d:7740", i+1))
	}
	conn.Send(&messages.Envelope{Kind: messages.KindPeers, Peers: []messages.PeerInfo{
		{ID: b.id.ID(), Addrs: bogus}, {ID: a.id.ID(), Addrs: bogus}}})
	addrsOf := func(id string) []string {
		for _, p := range diag(t, a).Peers {
			if p.ID == id {
				return p.Addrs
			}
		}
		return nil
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := addrsOf(b.id.ID()); len(got) < maxAddrsPerPeer {
			return fmt.Errorf("A's entry for B: %v", got)
		}
		return nil
	})
	old := b.addr
	b.restart() // on the in-memory network a restart takes a new address
	if b.addr == old {
		t.Fatalf("B kept its address %s", old)
	}
	testutil.Eventually(t, 15*time.Second, func() error {
		got := addrsOf(b.id.ID())
		at := slices.Index(got, b.addr)
		if at < 0 || slices.ContainsFunc(got[:at], func(s string) bool { return slices.Contains(bogus, s) }) {
			return fmt.Errorf("A's entry for B = %v, want B's address %s before the bogus ones", got, b.addr)
		}
		if len(got) > maxAddrsPerPeer {
			return fmt.Errorf("A's entry for B has %d addresses", len(got))
		}
		return nil
	})
}

// TestPeerSeenTakesTheBookFromHearsay: A's address book is full of
// peers nobody ever reached (peers that writers' lists named, saved in
// node.db; A starts with them). A writer that joins and connects to A is
// still remembered: a peer a session came up with takes the place of one
// only heard of.
func TestPeerSeenTakesTheBookFromHearsay(t *testing.T) {
	nodes := memMesh(t, "A", "B", "E")
	a := nodes[0]
	a.stop()
	ndb, err := store.Open(filepath.Join(a.dir, "node.db"), store.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= maxKnownPeers-2; n++ { // B and E fill the rest
		v := fmt.Sprintf(`{"addrs":["198.51.%d.%d:%d"],"lastSeen":0}`, n/250%250, n%250+1, 1+n/62500)
		if err := ndb.Set(knownPrefix+fmt.Sprintf("%064x", n), v); err != nil {
			t.Fatal(err)
		}
	}
	ndb.Close()
	a.restart()
	a.waitReady()
	if k := diag(t, a).Summary.KnownPeers; k != maxKnownPeers {
		t.Fatalf("A starts knowing %d peers, want %d", k, maxKnownPeers)
	}
	c := newTestNode(t, "C", nodeOpts{mem: a.opts.mem, join: a.invite(0)})
	// A remembers C as the session comes up, in the same step: the
	// first diagnostics that show C connected show its entry.
	var entry messages.PeerDiag
	testutil.Eventually(t, 15*time.Second, func() error {
		for _, p := range diag(t, a).Peers {
			if p.ID == c.id.ID() && p.State == "connected" {
				entry = p
				return nil
			}
		}
		return errors.New("C not connected to A")
	})
	if !slices.Contains(entry.Addrs, c.addr) {
		t.Errorf("A's entry for C = %v as it connected, want %s", entry.Addrs, c.addr)
	}
	if k := diag(t, a).Summary.KnownPeers; k > maxKnownPeers {
		t.Fatalf("A knows %d peers", k)
	}
}

// impersonateMem is impersonate over the in-memory network of a
// three-node memMesh (a keeps its one other peer): evil is stopped and a
// raw connection speaks for it past hello and accept, everything a sends
// read and dropped.
func impersonateMem(t *testing.T, evil, a *testNode) transport.Conn {
	t.Helper()
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
	evil.stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(a.peerIDs()) != 1 {
			return errors.New("the impersonated peer still connected")
		}
		return nil
	})
	ep := a.opts.mem.Listen(evil.id, nil)
	t.Cleanup(func() { ep.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	conn, err := ep.Dial(ctx, a.addr, a.id.ID())
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			if _, err := conn.Recv(); err != nil {
				return
			}
		}
	}()
	conn.Send(&messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: evil.id.ID(), Network: net.Key, Root: net.Root}})
	conn.Send(&messages.Envelope{Kind: messages.KindAccept, Accept: &messages.Accept{}})
	return conn
}

// TestHearsayAddressesAreNotPassedOn: a writer's peer list names B, a
// peer A was connected to, at addresses B never had. A keeps them to try
// (B may have moved), but its samples and lists pass on only the
// addresses B's own sessions gave: C, which hears of B from A alone (B
// is down, the liar is a raw connection to A), learns B's address and
// none of the made-up ones, so they cannot go from book to book.
func TestHearsayAddressesAreNotPassedOn(t *testing.T) {
	nodes := memMesh(t, "A", "B", "E")
	a, b, evil := nodes[0], nodes[1], nodes[2]
	conn := impersonateMem(t, evil, a)
	var bogus []string
	for i := range maxAddrsPerPeer - 1 {
		bogus = append(bogus, fmt.Sprintf("198.51.100.%d:7740", i+1))
	}
	conn.Send(&messages.Envelope{Kind: messages.KindPeers, Peers: []messages.PeerInfo{{ID: b.id.ID(), Addrs: bogus}}})
	entry := func(n *testNode, id string) []string {
		for _, p := range diag(t, n).Peers {
			if p.ID == id {
				return p.Addrs
			}
		}
		return nil
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := entry(a, b.id.ID()); !slices.Contains(got, bogus[0]) {
			return fmt.Errorf("A's entry for B: %v", got)
		}
		return nil
	})
	b.stop()
	c := newTestNode(t, "C", nodeOpts{mem: a.opts.mem, join: a.invite(0)})
	// A's sample names B with every address it passes on at once.
	testutil.Eventually(t, 15*time.Second, func() error {
		if got := entry(c, b.id.ID()); !slices.Contains(got, b.addr) {
			return fmt.Errorf("C's entry for B: %v, want B's address %s", got, b.addr)
		}
		return nil
	})
	if got := entry(c, b.id.ID()); slices.ContainsFunc(got, func(s string) bool { return slices.Contains(bogus, s) }) {
		t.Fatalf("C's entry for B = %v: A passed on addresses only E's list named", got)
	}
}

// TestHearsayAddressesOfAKnownPeerAreGivenUp: a writer's peer list
// names B, a peer A was connected to, at addresses B never had. Once B
// is down A dials them, as it dials any address of a known peer, but
// like every address learned second hand that never answered they are
// dropped after giveUpAfter attempts; B's own address is kept (and
// dialed) for when B comes back. (A lying writer made every node that
// took its list dial addresses of its choice for as long as the peer it
// named stayed away.)
func TestHearsayAddressesOfAKnownPeerAreGivenUp(t *testing.T) {
	nodes := memMesh(t, "A", "B", "E")
	a, b, evil := nodes[0], nodes[1], nodes[2]
	conn := impersonateMem(t, evil, a)
	var bogus []string
	for i := range maxAddrsPerPeer - 1 {
		bogus = append(bogus, fmt.Sprintf("198.51.100.%d:7740", i+1))
	}
	conn.Send(&messages.Envelope{Kind: messages.KindPeers, Peers: []messages.PeerInfo{{ID: b.id.ID(), Addrs: bogus}}})
	entry := func() []string {
		for _, p := range diag(t, a).Peers {
			if p.ID == b.id.ID() {
				return p.Addrs
			}
		}
		return nil
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := entry(); !slices.Contains(got, bogus[0]) {
			return fmt.Errorf("A's entry for B: %v", got)
		}
		return nil
	})
	b.stop()
	testutil.Eventually(t, 20*time.Second, func() error {
		got := entry()
		if slices.ContainsFunc(got, func(s string) bool { return slices.Contains(bogus, s) }) {
			return fmt.Errorf("A's entry for B = %v: addresses only E's list named are still dialed", got)
		}
		if !slices.Contains(got, b.addr) {
			return fmt.Errorf("A's entry for B = %v lost B's own address %s", got, b.addr)
		}
		return nil
	})
}

// TestMovedPeersAddressIsForgotten: B went away, and its address (its
// own, which A dials with no give-up) now belongs to another node. A
// dial there finds another key: the address is B's no longer, and A
// forgets it at once. A once kept dialing it for B for good, a failed
// handshake with that node every backoff, kept it in node.db, and,
// dialing it, never dialed that node's own peer there.
func TestMovedPeersAddressIsForgotten(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := newTestNode(t, "B", nodeOpts{join: a.invite(0)})
	waitMesh(t, 15*time.Second, a, b)
	entry := func() []string {
		for _, p := range diag(t, a).Peers {
			if p.ID == b.id.ID() {
				return p.Addrs
			}
		}
		return nil
	}
	if got := entry(); !slices.Contains(got, b.addr) {
		t.Fatalf("A's entry for B = %v, want B's address %s", got, b.addr)
	}
	b.stop()
	other := newIdentities(t, 1)[0]
	ep, err := transport.Listen(transport.Config{Identity: other, ListenAddr: b.addr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	testutil.Eventually(t, 15*time.Second, func() error {
		if got := entry(); slices.Contains(got, b.addr) {
			return fmt.Errorf("A's entry for B = %v still holds %s, where another node answers", got, b.addr)
		}
		return nil
	})
}
