package peer

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

func TestRestartCatchesUpWithoutFlags(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	c := joinNode(t, "C", a)
	waitMesh(t, 15*time.Second, a, b, c)
	c.stop()
	for i := 0; i < 20; i++ {
		a.addDomain(fmt.Sprintf("d%02d.p2p", i), hash('a'))
	}
	b.addDomain("bee.p2p", hash('b'))
	waitConverged(t, 15*time.Second, a, b)
	// C comes back with no --join and no --bootstrap: known peers only.
	c.restart()
	waitMesh(t, 15*time.Second, a, b, c)
	waitConverged(t, 15*time.Second, a, b, c)
	testutil.Eventually(t, 15*time.Second, func() error {
		ds := c.domains()
		for _, name := range []string{"d00.p2p", "d19.p2p", "bee.p2p"} {
			if d, ok := ds[name]; !ok || d.ConsensusStatus != "resolved" {
				return fmt.Errorf("C sees %s as %+v", name, d)
			}
		}
		return nil
	})
}

// A joiner whose join session ends right after the inviter accepted it
// (a peer dialing in at that moment replaces it) holds the network's key
// and root but no op yet, so no writer at all: it must still take its
// inviter's sessions, or it refuses everyone for good.
func TestJoinerWithoutOpsAcceptsItsInviter(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	netw := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
	c := newTestNode(t, "C", nodeOpts{
		joined:    &messages.JoinNetwork{Key: netw.Key, Root: netw.Root, Inviter: b.id.ID()},
		bootstrap: []string{b.addr},
	})
	stranger, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if !c.isWriter(a.id.ID()) || !c.isWriter(b.id.ID()) {
		t.Fatal("a joiner without ops refuses its root or its inviter")
	}
	if c.isWriter(stranger.ID()) {
		t.Fatal("a joiner without ops takes any peer as a writer")
	}
	if r := ask[*messages.AddWriterReply](t, b.sys, b.ledger, &messages.AddWriter{ID: c.id.ID()}); r.Err != nil {
		t.Fatal(r.Err)
	}
	b.addDomain("bee.p2p", hash('b'))
	testutil.Eventually(t, 15*time.Second, func() error {
		if !c.isWriter(c.id.ID()) {
			return fmt.Errorf("C has not synced the op that made it a writer")
		}
		if _, ok := c.domains()["bee.p2p"]; !ok {
			return fmt.Errorf("C lacks bee.p2p")
		}
		return nil
	})
	waitConverged(t, 15*time.Second, a, b, c)
	// Once it is a writer its ledger decides alone: an id it never
	// learned is no writer.
	if c.isWriter(stranger.ID()) {
		t.Fatal("a synced node takes an unknown peer as a writer")
	}
}

func TestFiveNodesConverge(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	nodes := []*testNode{a}
	for _, name := range []string{"B", "C", "D", "E"} {
		// Each node is invited by the previous one: discovery must still
		// connect everyone to everyone.
		nodes = append(nodes, joinNode(t, name, nodes[len(nodes)-1]))
	}
	waitMesh(t, 30*time.Second, nodes...)
	for i, n := range nodes {
		n.addDomain(fmt.Sprintf("n%d.p2p", i), hash("abcde"[i]))
	}
	waitConverged(t, 30*time.Second, nodes...)
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, n := range nodes {
			ds := n.domains()
			for i := range nodes {
				d, ok := ds[fmt.Sprintf("n%d.p2p", i)]
				if !ok || d.ConsensusState == nil || d.ConsensusState.Status != "resolved" || d.ConsensusState.MinVotes != 3 {
					return fmt.Errorf("%s sees n%d.p2p as %+v", n.name, i, d.ConsensusState)
				}
			}
		}
		return nil
	})
}

func TestGarbageFramesDisconnectPeer(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	waitMesh(t, 15*time.Second, a, b)
	for _, tt := range []struct {
		name, fault string
		send        []byte
	}{
		{"not cbor", "bad frame", frameOf([]byte("garbage garbage"))},
		{"oversize", "frame too large", []byte{0x7f, 0xff, 0xff, 0xff}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id, _ := identity.Generate()
			tc, err := transport.ClientTLS(id, a.id.ID())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			qc, err := quic.DialAddr(ctx, a.addr, tc, &quic.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer qc.CloseWithError(0, "")
			st, err := qc.OpenStreamSync(ctx)
			if err != nil {
				t.Fatal(err)
			}
			st.Write([]byte(transport.ControlPreface))
			st.Write(tt.send)
			select {
			case <-qc.Context().Done():
			case <-ctx.Done():
				t.Fatal("garbage peer still connected")
			}
			waitLog(t, a, "closing peer connection: "+tt.fault, "peer="+id.ID()[:16])
			// A keeps serving B.
			a.addDomain("still-"+tt.name[:3]+".p2p", hash('a'))
			waitConverged(t, 10*time.Second, a, b)
			if got := a.peerIDs(); len(got) != 1 || got[0] != b.id.ID() {
				t.Fatalf("A peers = %v", shortAll(got))
			}
		})
	}
}

func frameOf(p []byte) []byte {
	b := make([]byte, 4+len(p))
	binary.BigEndian.PutUint32(b, uint32(len(p)))
	copy(b[4:], p)
	return b
}

func TestSimultaneousDialsKeepOneConnection(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	waitMesh(t, 15*time.Second, a, b)
	// Restart both so each dials the other from its known peers at once.
	a.stop()
	b.stop()
	a.start()
	b.start()
	waitMesh(t, 15*time.Second, a, b)
	// Stable: the mesh holds for a while with one session per side.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if len(a.peerIDs()) != 1 || len(b.peerIDs()) != 1 {
			t.Fatal("connection flapped after duplicate resolution")
		}
		time.Sleep(20 * time.Millisecond) // sampling a steady state
	}
	st := diag(t, a)
	if st.Summary.ConnectedPeers != 1 {
		t.Fatalf("diag connected = %d", st.Summary.ConnectedPeers)
	}
}

func TestJoinerWaitsForInviterToComeBack(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	inv := a.invite(0)
	a.stop()
	j := newTestNode(t, "J", nodeOpts{join: inv})
	testutil.Eventually(t, 10*time.Second, func() error {
		if d := diag(t, j); d.Summary.FailedAttempts < 2 {
			return fmt.Errorf("failed attempts %d", d.Summary.FailedAttempts)
		}
		return nil
	})
	// An unreachable inviter may come back: that is no reason to stop.
	if errs := j.fatals.all(); len(errs) != 0 {
		t.Fatalf("J reported %v while the inviter was away", errs)
	}
	a.start() // same address, same data
	waitMesh(t, 20*time.Second, a, j)
	if !a.isWriter(j.id.ID()) {
		t.Fatal("J joined but is not a writer")
	}
	if errs := j.fatals.all(); len(errs) != 0 {
		t.Fatalf("J reported %v", errs)
	}
}

func TestSilentPeerTimesOut(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	id, _ := identity.Generate()
	r := dialRaw(t, id, a)
	select {
	case <-r.conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a peer that never says hello was not disconnected")
	}
	waitLog(t, a, "handshake timed out")
}

// The supervisor only sees the transport seam: the same mesh forms and
// replicates over the in-memory network.
func TestMeshOverMemoryTransport(t *testing.T) {
	mem := transport.NewMemNetwork()
	a := newTestNode(t, "A", nodeOpts{mem: mem})
	join := func(name string, inviter *testNode) *testNode {
		n := newTestNode(t, name, nodeOpts{mem: mem, join: inviter.invite(0)})
		testutil.Eventually(t, 15*time.Second, func() error {
			if !n.isWriter(n.id.ID()) {
				return fmt.Errorf("%s not a writer yet", name)
			}
			return nil
		})
		return n
	}
	b := join("B", a)
	c := join("C", b)
	waitMesh(t, 15*time.Second, a, b, c)
	c.addDomain("mem.p2p", hash('d'))
	waitConverged(t, 15*time.Second, a, b, c)
}
