package peer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
)

// relayedConn is a Conn that reads as a relayed path.
type relayedConn struct{ transport.Conn }

func (relayedConn) Path() string { return transport.PathRelayed }
func (relayedConn) Via() string  { return "relay" }

// TestRelayedHelloDialsAtMostABookEntry: a writer we reach through a
// relay keeps being dialed directly at its hello's addresses, by dialers
// that never give up. A writer that lies lists hundreds of addresses of
// its choosing there: we dial at most as many as an address book entry
// holds (maxAddrsPerPeer), not every one of them for as long as we run,
// each dialer taking a slot (maxDialers) honest peers need.
func TestRelayedHelloDialsAtMostABookEntry(t *testing.T) {
	nodes := memMesh(t, "A", "E")
	a, evil := nodes[0], nodes[1]
	mem := a.opts.mem
	evilID := evil.id
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
	evil.stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(a.peerIDs()) != 0 {
			return errors.New("E still connected")
		}
		return nil
	})

	// E, back as a bare endpoint, reached by A through a "relay".
	ep := mem.Listen(evilID, nil)
	defer ep.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := a.ep.Dial(ctx, ep.Addr().String(), evilID.ID())
	if err != nil {
		t.Fatal(err)
	}
	in, err := ep.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close("test over")
	go func() {
		for {
			if _, err := in.Recv(); err != nil {
				return
			}
		}
	}()
	victims := make([]string, 200)
	first := map[string]bool{}
	for i := range victims {
		victims[i] = fmt.Sprintf("192.0.2.%d:%d", 1+i%250, 7000+i)
		if i < maxAddrsPerPeer {
			first[victims[i]] = true
		}
	}
	a.sys.Root.Send(a.peers, &newConn{conn: relayedConn{out}})
	in.Send(&messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: evilID.ID(), Network: net.Key, Root: net.Root, Addrs: victims, Neighbours: 1}})
	in.Send(&messages.Envelope{Kind: messages.KindAccept, Accept: &messages.Accept{}})

	// A dials the hello's first addresses directly; none past them.
	seen := map[string]bool{}
	testutil.Eventually(t, 15*time.Second, func() error {
		for _, is := range diag(t, a).ConnectionIssues {
			if is.Kind != "dial" || is.PeerID != evilID.ID() {
				continue
			}
			seen[is.Addr] = true
		}
		for addr := range seen {
			if !first[addr] && strings.HasPrefix(addr, "192.0.2.") {
				t.Fatalf("A dialed %s, past the first %d addresses of the hello (%d dialed so far)", addr, maxAddrsPerPeer, len(seen))
			}
		}
		for addr := range first {
			if !seen[addr] {
				return fmt.Errorf("A has not dialed %s yet", addr)
			}
		}
		return nil
	})
}
