package peerbench

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/peer/peertest"
	"peerdns/http/httpx"
	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// node is an in-process node's peer side (see actors/peer/peertest).
type node struct {
	id     *identity.Identity
	sys    *actor.ActorSystem
	ledger *actor.PID
	peers  *actor.PID
	ep     *transport.QUICEndpoint
	stop   func()
}

func startNode(tb testing.TB, join string) *node {
	tb.Helper()
	p := peertest.Start(tb, join, nil)
	return &node{id: p.ID, sys: p.Sys, ledger: p.Ledger, peers: p.Peers, ep: p.Endpoint, stop: p.Stop}
}

func ask[R any](tb testing.TB, n *node, pid *actor.PID, req any) R {
	tb.Helper()
	r, err := httpx.Ask[R](n.sys.Root, pid, req, 30*time.Second)
	if err != nil {
		tb.Fatalf("ask %T: %v", req, err)
	}
	return r
}

func (n *node) vv(tb testing.TB) messages.VersionVector {
	return ask[*messages.GetVersionVectorReply](tb, n, n.ledger, &messages.GetVersionVector{}).VV
}

func (n *node) invite(tb testing.TB) string {
	tb.Helper()
	var r *messages.CreateInviteReply
	waitFor(tb, 10*time.Second, func() error {
		r = ask[*messages.CreateInviteReply](tb, n, n.peers, &messages.CreateInvite{})
		return r.Err
	})
	return r.Invite
}

// waitFor polls cond with a deadline.
var waitFor = testutil.Eventually

// join starts a node joining n's network and waits until they are peers.
func join(tb testing.TB, n *node) *node {
	j := startNode(tb, n.invite(tb))
	waitFor(tb, 20*time.Second, func() error {
		if ids := ask[*messages.GetPeersReply](tb, j, j.peers, &messages.GetPeers{}).IDs; len(ids) == 0 {
			return fmt.Errorf("joiner not connected")
		}
		return nil
	})
	return j
}

// claimOps makes count claim ops signed by id, numbered after have.
func claimOps(id *identity.Identity, have uint64, count int, tag string) []*messages.Op {
	ops := make([]*messages.Op, count)
	now := time.Now().UnixMilli()
	for i := range ops {
		op := &messages.Op{
			Writer: id.ID(), Seq: have + uint64(i) + 1,
			HLC:   messages.HLC{Wall: now, Logical: uint32(i)},
			Key:   messages.ClaimKey(fmt.Sprintf("%s%06d.p2p", tag, i), id.ID()),
			Value: `{"hash":"hs://` + fmt.Sprintf("%064x", i) + `","ssl":false,"clients":[],"services":[]}`,
		}
		sb, _ := op.SigningBytes()
		op.Sig = id.Sign(sb)
		ops[i] = op
	}
	return ops
}

// inject commits count claims signed by n's own key through n's ledger
// in one ApplyOps (verification and durable commit included), as if its
// API had made them. The ledger may cast its own votes between our read
// of its version vector and the batch; then the batch is retried with
// fresh sequence numbers. It returns the highest seq committed.
func (n *node) inject(tb testing.TB, count int, tag string) uint64 {
	tb.Helper()
	for try := 0; try < 20; try++ {
		ops := claimOps(n.id, n.vv(tb)[n.id.ID()], count, fmt.Sprintf("%s%d-", tag, try))
		r := ask[*messages.ApplyOpsReply](tb, n, n.ledger, &messages.ApplyOps{From: "bench", Ops: ops})
		if r.Rejected > 0 {
			tb.Fatalf("inject: %+v", r)
		}
		if r.Applied == count {
			return ops[count-1].Seq
		}
	}
	tb.Fatal("inject: the ledger kept writing concurrently")
	return 0
}
