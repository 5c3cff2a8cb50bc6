package peer

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// TestFutureDatedOpDoesNotMoveClocks: a writer signs an op of its own
// dated a century ahead with the logical counter at its maximum, and
// one dated half a minute ahead with the counter at its maximum too,
// and sends them to A, which applies them and passes them on. Every
// node keeps its clock: their next ops are dated now (but after the op
// half a minute ahead, which they have seen), and a resolved claimant's
// remove still makes every peer drop its entries on the domain (with
// the clocks moved, every later op of every node carried one and the
// same date, so no entry was older than the cleanup request and a
// losing claim took the domain over).
func TestFutureDatedOpDoesNotMoveClocks(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	c := joinNode(t, "C", a)
	e := joinNode(t, "E", a)
	nodes := []*testNode{a, b, c}
	waitMesh(t, 15*time.Second, a, b, c, e)

	seq := a.vv()[e.id.ID()] + 1
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
	e.stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(a.peerIDs()) != 2 {
			return errors.New("A still sees E")
		}
		return nil
	})
	r := dialRaw(t, e.id, a)
	r.conn.Send(&messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: e.id.ID(), Network: net.Key, Root: net.Root}})
	r.recvKind(t, messages.KindAccept)
	r.conn.Send(&messages.Envelope{Kind: messages.KindAccept, Accept: &messages.Accept{}})
	op := func(seq uint64, at time.Time, domain string) *messages.Op {
		op := &messages.Op{Writer: e.id.ID(), Seq: seq, HLC: messages.HLC{Wall: at.UnixMilli(), Logical: math.MaxUint32},
			Key: messages.ClaimKey(domain, e.id.ID()), Value: `{"hash":"` + hash('f') + `"}`}
		sb, _ := op.SigningBytes()
		op.Sig = e.id.Sign(sb)
		return op
	}
	// A century ahead, then half a minute ahead (a clock a little fast),
	// both with the logical counter at its top.
	far := op(seq, time.Now().AddDate(100, 0, 0), "far.p2p")
	near := op(seq+1, time.Now().Add(30*time.Second), "near.p2p")
	if err := r.conn.Send(&messages.Envelope{Kind: messages.KindOps, Ops: []*messages.Op{far, near}}); err != nil {
		t.Fatal(err)
	}
	// The ops are E's own, well signed: every node applies them.
	testutil.Eventually(t, 15*time.Second, func() error {
		for _, n := range nodes {
			if got := n.vv()[e.id.ID()]; got < near.Seq {
				return fmt.Errorf("%s holds E's ops up to %d, want %d", n.name, got, near.Seq)
			}
		}
		return nil
	})

	a.addDomain("x.p2p", hash('a'))
	waitConverged(t, 15*time.Second, nodes...)
	b.addDomain("x.p2p", hash('b'))
	waitConverged(t, 15*time.Second, nodes...)
	for _, n := range nodes {
		own := ask[*messages.GetOpsSinceReply](t, n.sys, n.ledger, &messages.GetOpsSince{
			VV: messages.VersionVector{n.id.ID(): n.vv()[n.id.ID()] - 1}, Only: map[string]bool{n.id.ID(): true}}).Ops
		if len(own) != 1 {
			t.Fatalf("%s: %d ops of its own since its last but one", n.name, len(own))
		}
		h := own[0].HLC
		if ahead := time.Until(time.UnixMilli(h.Wall)); ahead > time.Minute {
			t.Errorf("%s's last op is dated %v ahead (logical %d)", n.name, ahead.Round(time.Hour), h.Logical)
		}
		if !near.HLC.Less(h) {
			t.Errorf("%s's last op %+v is not after E's op %+v that it applied before", n.name, h, near.HLC)
		}
	}
	testutil.Eventually(t, 15*time.Second, func() error {
		for _, n := range nodes {
			if d := n.domains()["x.p2p"]; d.ConsensusState == nil || d.ConsensusState.Status != "resolved" || d.Hash != hash('a') {
				return fmt.Errorf("%s: %+v hash %s", n.name, d.ConsensusState, d.Hash)
			}
		}
		return nil
	})
	if r := ask[*messages.RemoveDomainReply](t, a.sys, a.ledger, &messages.RemoveDomain{Domain: "x.p2p"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, n := range nodes {
			if es := entriesFor(n, "x.p2p"); len(es) != 0 {
				return fmt.Errorf("%s still has %v", n.name, es)
			}
		}
		return nil
	})
}
