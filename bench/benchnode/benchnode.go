// Package benchnode starts whole nodes for the benchmarks under bench/
// and fills them with data the way peers would.
package benchnode

import (
	"fmt"
	"io"
	"testing"
	"time"

	"peerdns/cmd/peerdns/node"
	"peerdns/http/httpx"
	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// Start starts a node on 127.0.0.1 ports picked by the system, with no
// public upstream; it stops when the benchmark ends.
func Start(b testing.TB) *node.Node {
	b.Helper()
	n, err := node.Start(node.Config{
		Data: b.TempDir(), AdminAddr: "127.0.0.1:0", DNSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		HTTPSAddr: "127.0.0.1:0", P2PAddr: "127.0.0.1:0", AdminDomain: "admin.p2p", LogLevel: "error",
		Upstream: []string{"127.0.0.1:1"},
	}, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(n.Stop)
	return n
}

// Seed makes a second writer claim count domains (d00000.p2p, ...) in one
// batch, as a peer would replicate them, and waits until the node has
// settled them all (its votes committed).
func Seed(b testing.TB, n *node.Node, count int) {
	b.Helper()
	root, led := n.Ledger()
	w, _ := identity.Generate()
	if r, err := httpx.Ask[*messages.AddWriterReply](root, led, &messages.AddWriter{ID: w.ID()}, 5*time.Second); err != nil || r.Err != nil {
		b.Fatalf("add writer: %v %v", err, r)
	}
	ops := make([]*messages.Op, 0, count)
	hash := testutil.Hash('c')
	for i := 0; i < count; i++ {
		op := &messages.Op{Writer: w.ID(), Seq: uint64(i + 1), HLC: messages.HLC{Wall: time.Now().UnixMilli(), Logical: uint32(i)},
			Key: messages.ClaimKey(fmt.Sprintf("d%05d.p2p", i), w.ID()), Value: `{"hash":"` + hash + `"}`}
		msg, _ := op.SigningBytes()
		op.Sig = w.Sign(msg)
		ops = append(ops, op)
	}
	r, err := httpx.Ask[*messages.ApplyOpsReply](root, led, &messages.ApplyOps{From: "bench", Ops: ops}, time.Minute)
	if err != nil || r.Applied != count {
		b.Fatalf("apply: %v %+v", err, r)
	}
	// Recalculate answers once every domain has settled.
	if rr, err := httpx.Ask[*messages.RecalculateReply](root, led, &messages.Recalculate{}, 5*time.Minute); err != nil || rr.Domains != count {
		b.Fatalf("settle: %v %+v", err, rr)
	}
}
