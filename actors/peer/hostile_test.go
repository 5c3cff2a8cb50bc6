package peer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// TestHostileWriterCannotBreakNode: a writer (valid key, invited) sends a
// deterministic stream of well-formed but hostile frames: vectors naming
// unknown writers and huge seqs, forged and out-of-order ops, peer lists
// full of bogus ids and addresses, stray handshake frames. The node must
// keep serving: honest peers stay connected and keep replicating, no op
// of the hostile stream reaches the view, and state stays bounded.
func TestHostileWriterCannotBreakNode(t *testing.T) {
	nodes := memMesh(t, "A", "B", "E")
	a, b, evil := nodes[0], nodes[1], nodes[2]
	mem := a.opts.mem
	evilID := evil.id
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
	evil.stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(a.peerIDs()) != 1 {
			return errors.New("E still connected")
		}
		return nil
	})

	rng := rand.New(rand.NewPCG(1, 2))
	randID := func() string {
		id, _ := identity.Generate()
		return id.ID()
	}
	hostile := func() *messages.Envelope {
		switch rng.IntN(6) {
		case 0:
			vv := messages.VersionVector{}
			for i := 0; i < rng.IntN(50); i++ {
				vv[randID()] = rng.Uint64()
			}
			vv[a.id.ID()] = 0
			return &messages.Envelope{Kind: messages.KindVV, VV: vv}
		case 1:
			vv := messages.VersionVector{randID(): rng.Uint64()}
			return &messages.Envelope{Kind: messages.KindWant, VV: vv}
		case 2:
			var ops []*messages.Op
			for i := 0; i < 1+rng.IntN(20); i++ {
				w := []string{a.id.ID(), b.id.ID(), evilID.ID(), randID()}[rng.IntN(4)]
				op := &messages.Op{Writer: w, Seq: 1 + rng.Uint64N(1000), Key: messages.ClaimKey(fmt.Sprintf("evil%d.p2p", rng.IntN(100)), w),
					Value: `{"hash":"hs://` + strings.Repeat("e", 64) + `"}`, HLC: messages.HLC{Wall: rng.Int64()}}
				sb, _ := op.SigningBytes()
				op.Sig = evilID.Sign(sb) // valid only when w is E itself
				if w == evilID.ID() {
					op.Key = "not-a-key:" + fmt.Sprint(i) // E's own ops have bad keys
					sb, _ = op.SigningBytes()
					op.Sig = evilID.Sign(sb)
				}
				ops = append(ops, op)
			}
			return &messages.Envelope{Kind: messages.KindOps, Ops: ops}
		case 3:
			var ps []messages.PeerInfo
			for i := 0; i < rng.IntN(40); i++ {
				ps = append(ps, messages.PeerInfo{ID: []string{randID(), "short", a.id.ID()}[rng.IntN(3)],
					Addrs: []string{"0.0.0.0:1", "bad", fmt.Sprintf("127.0.0.1:%d", 1+rng.IntN(60000)), strings.Repeat("x", 300)}})
			}
			return &messages.Envelope{Kind: messages.KindPeers, Peers: ps}
		case 4:
			return &messages.Envelope{Kind: messages.KindPing, Ping: &messages.Ping{SentUnixNano: rng.Int64()}}
		default:
			return &messages.Envelope{Kind: messages.KindPong, Ping: &messages.Ping{SentUnixNano: rng.Int64()}}
		}
	}

	// Several rounds: each reconnects as E and floods until A hangs up
	// (a stray handshake frame ends a round early).
	for round := 0; round < 4; round++ {
		ep := mem.Listen(evilID, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := ep.Dial(ctx, a.addr, a.id.ID())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		go func() { // drain what A sends
			for {
				if _, err := conn.Recv(); err != nil {
					return
				}
			}
		}()
		conn.Send(&messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: evilID.ID(), Network: net.Key, Root: net.Root}})
		conn.Send(&messages.Envelope{Kind: messages.KindAccept, Accept: &messages.Accept{}})
		for i := 0; i < 200; i++ {
			m := hostile()
			if round == 3 && i == 150 {
				m = &messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: evilID.ID()}}
			}
			if conn.Send(m) != nil {
				break
			}
		}
		conn.Close("round over")
		ep.Close()
	}

	// A still serves: B is connected and replication works both ways.
	a.addDomain("honest-a.p2p", hash('a'))
	b.addDomain("honest-b.p2p", hash('b'))
	testutil.Eventually(t, 15*time.Second, func() error {
		for _, n := range []*testNode{a, b} {
			ds := n.domains()
			for _, name := range []string{"honest-a.p2p", "honest-b.p2p"} {
				if d, ok := ds[name]; !ok || d.ConsensusStatus == "" {
					return fmt.Errorf("%s lacks %s", n.name, name)
				}
			}
			for name := range ds {
				if strings.HasPrefix(name, "evil") {
					return fmt.Errorf("%s accepted hostile %s", n.name, name)
				}
			}
		}
		return nil
	})
	d := diag(t, a)
	if d.Summary.KnownPeers > maxKnownPeers || len(d.ConnectionIssues) > maxIssues {
		t.Fatalf("state grew: %d known peers, %d issues", d.Summary.KnownPeers, len(d.ConnectionIssues))
	}
	for _, p := range d.Peers {
		if len(p.Addrs) > maxAddrsPerPeer {
			t.Fatalf("peer %.8s has %d addresses", p.ID, len(p.Addrs))
		}
	}
	if got := a.peerIDs(); len(got) < 1 {
		t.Fatalf("A lost its honest peer: %v", got)
	}
	// The bogus peers E advertised never answer: A gives up on them and
	// forgets them, keeping only peers it was really connected to.
	testutil.Eventually(t, 20*time.Second, func() error {
		if k := diag(t, a).Summary.KnownPeers; k > 2 {
			return fmt.Errorf("A still knows %d peers", k)
		}
		return nil
	})
}
