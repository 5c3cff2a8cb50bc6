// Package node_test measures a whole node through its admin API: durable
// add-domain, consensus recompute and the domain listing with 10,000
// domains. Run: go test -bench . -benchtime 3x ./bench/node/
package node_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"peerdns/http/httpx"
	"peerdns/internal/identity"
	"peerdns/internal/node"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

func startNode(b *testing.B) *node.Node {
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

// seed makes a second writer claim count domains in one batch, as a peer
// would replicate them, and waits until the node has voted on all.
func seed(b *testing.B, n *node.Node, count int) {
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
	// Recalculate answers once every domain has settled (votes committed).
	if rr, err := httpx.Ask[*messages.RecalculateReply](root, led, &messages.Recalculate{}, 5*time.Minute); err != nil || rr.Domains != count {
		b.Fatalf("settle: %v %+v", err, rr)
	}
}

// BenchmarkConsensusRecompute10k: POST /api/consensus/recalculate with
// 10,000 domains, answered once all are re-evaluated.
func BenchmarkConsensusRecompute10k(b *testing.B) {
	n := startNode(b)
	seed(b, n, 10000)
	url := "http://" + n.AdminAddr() + "/api/consensus/recalculate"
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if code, body := testutil.Call(b, "POST", url, ""); code != 200 {
			b.Fatalf("recalculate = %d %s", code, body)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/recompute")
}

// BenchmarkResolvedDomains10k: GET /api/resolved-domains with 10,000
// domains over a kept-alive connection.
func BenchmarkResolvedDomains10k(b *testing.B) {
	n := startNode(b)
	seed(b, n, 10000)
	url := "http://" + n.AdminAddr() + "/api/resolved-domains"
	// The first read after a change rebuilds the listing and its JSON in
	// the ledger actor; report it apart from the steady-state reads.
	t0 := time.Now()
	if code, _ := testutil.Call(b, "GET", url, ""); code != 200 {
		b.Fatalf("status %d", code)
	}
	rebuild := time.Since(t0)
	var size int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		size = len(body)
	}
	b.ReportMetric(float64(size)/1024, "KiB/response")
	b.ReportMetric(float64(rebuild.Milliseconds()), "ms/first-read-after-change")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/request")
}

// BenchmarkDurableAddDomain: sequential POST /api/add-domain, each answered
// after its claim and vote are fsynced and consensus settled.
func BenchmarkDurableAddDomain(b *testing.B) {
	n := startNode(b)
	base := "http://" + n.AdminAddr()
	hash := testutil.Hash('d')
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		testutil.AddDomain(b, base, fmt.Sprintf("a%07d.p2p", i), hash)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "adds/s")
}
