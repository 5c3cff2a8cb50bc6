package ledger

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// BenchmarkMemoryPerDomain: the live heap a ledger holds per resolved
// domain in a network of R (24) writers, every one of which votes on
// every domain, as up to R writers do and beyond R a domain's replica
// set does: the claim, 24 votes, their log entries, index, stored
// copies, evaluation results, addresses and listings. The claims and
// the peers' votes come in signed ops of 100 writes each, as batched
// commits send them; the node's own votes are its auto-votes. Reported
// as B/domain (the heap after a collection, less the heap before the
// claims, over the domains).
func BenchmarkMemoryPerDomain(b *testing.B) {
	const domains, perOp = 2000, 100
	for range b.N {
		b.StopTimer()
		l := newTestLedgerWith(b, b.TempDir(), nil)
		peers, _ := addConnectedWriters(b, l, 23)
		before := liveHeap()
		b.StartTimer()

		claimant := peers[0]
		names := make([]string, domains)
		for i := range names {
			names[i] = fmt.Sprintf("mem%05d.p2p", i)
		}
		seqs := map[string]uint64{}
		apply := func(ops []*messages.Op) {
			rep := ask[*messages.ApplyOpsReply](b, l, &messages.ApplyOps{From: "bench", Ops: ops})
			if rep.Applied != len(ops) {
				b.Fatalf("applied %+v of %d ops", rep, len(ops))
			}
		}
		batch := func(from int, key func(name string) string, value string, signer int) *messages.Op {
			id := peers[signer]
			seqs[id.ID()]++
			op := &messages.Op{Seq: seqs[id.ID()], HLC: messages.HLC{Wall: time.Now().UnixNano()}}
			for _, name := range names[from:min(from+perOp, domains)] {
				op.Batch = append(op.Batch, messages.Write{Key: key(name), Value: value})
			}
			return sign(b, id, op)
		}
		for from := 0; from < domains; from += perOp {
			apply([]*messages.Op{batch(from, func(n string) string { return messages.ClaimKey(n, claimant.ID()) }, `{"hash":"`+hashA+`"}`, 0)})
		}
		for p := range peers {
			var ops []*messages.Op
			for from := 0; from < domains; from += perOp {
				ops = append(ops, batch(from, func(n string) string { return messages.VoteKey(n, peers[p].ID(), claimant.ID()) }, messages.VoteMarker, p))
			}
			apply(ops)
		}
		testutil.Eventually(b, time.Minute, func() error {
			resolved := 0
			for _, d := range ask[*messages.GetDomainsReply](b, l, &messages.GetDomains{}).Domains {
				if d.ConsensusState != nil && d.ConsensusState.Status == "resolved" && d.ConsensusState.TotalVotes == 24 {
					resolved++
				}
			}
			if resolved < domains {
				return fmt.Errorf("%d of %d domains resolved with 24 votes", resolved, domains)
			}
			return nil
		})
		b.StopTimer()
		b.ReportMetric(float64(liveHeap()-before)/domains, "B/domain")
		l.stop()
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
