// Package node_test measures a whole node through its admin API: durable
// add-domain, consensus recompute and the domain listing with 10,000
// domains. Run: go test -bench . -benchtime 3x ./bench/node/
package node_test

import (
	"fmt"
	"io"
	"net/http"
	"peerdns/bench/benchnode"
	"testing"
	"time"

	"peerdns/cmd/peerdns/node"
	"peerdns/internal/testutil"
)

func startNode(b *testing.B) *node.Node { return benchnode.Start(b) }

func seed(b *testing.B, n *node.Node, count int) { benchnode.Seed(b, n, count) }

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
