package peer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
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
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
	evil.stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(a.peerIDs()) != 1 {
			return errors.New("E still connected")
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
