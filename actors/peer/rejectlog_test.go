package peer

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// TestRejectedOpsLogBounded: a writer sends a frame of 400 ops, each
// with a 2 KiB key that is not its own. The node rejects and counts
// every one, and what it logs of them is a few short lines, not a line
// per op carrying the peer's key whole (log volume would otherwise be
// the peer's to choose, at the rate it sends). The same for cleanup
// requests it ignores.
func TestRejectedOpsLogBounded(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	waitMesh(t, 15*time.Second, a, b)
	r := impersonate(t, b, a)
	go func() {
		for {
			if _, err := r.conn.Recv(); err != nil {
				return
			}
		}
	}()
	before := ask[*messages.GetConsensusMetricsReply](t, a.sys, a.ledger, &messages.GetConsensusMetrics{}).Metrics.ValidationFailures
	const n = 400
	seq := a.vv()[b.id.ID()] + 1
	var ops []*messages.Op
	for i := range n {
		op := &messages.Op{Writer: b.id.ID(), Seq: seq, HLC: messages.HLC{Wall: time.Now().UnixMilli()},
			Key: messages.ClaimKey(fmt.Sprintf("x%d.p2p", i), strings.Repeat("q", 2048)), Value: `{"hash":"` + hash('x') + `"}`}
		sb, _ := op.SigningBytes()
		op.Sig = b.id.Sign(sb)
		ops = append(ops, op)
	}
	if err := r.conn.Send(&messages.Envelope{Kind: messages.KindOps, Ops: ops}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		m := ask[*messages.GetConsensusMetricsReply](t, a.sys, a.ledger, &messages.GetConsensusMetrics{}).Metrics
		if got := m.ValidationFailures - before; got < n {
			return fmt.Errorf("%d validation failures counted, want %d", got, n)
		}
		return nil
	})
	waitLog(t, a, "peer sent ops that failed validation", "rejected=400")
	lines, longest := 0, 0
	for _, line := range strings.Split(a.logs.String(), "\n") {
		if strings.Contains(line, "rejected op") {
			lines++
			longest = max(longest, len(line))
		}
	}
	if lines == 0 {
		t.Fatal(errors.New("A logged none of the rejected ops"))
	}
	if lines > 4 || longest > 1024 {
		t.Fatalf("A logged %d lines about rejected ops, the longest %d bytes", lines, longest)
	}

	// A valid op of B's asking, in one batch, for the cleanup of 200
	// domains it does not hold, each named by 1 KiB: applied, and the
	// requests ignored in one short line.
	batch := &messages.Op{Writer: b.id.ID(), Seq: seq, HLC: messages.HLC{Wall: time.Now().UnixMilli()}}
	for i := range 200 {
		batch.Batch = append(batch.Batch, messages.Write{Key: messages.CleanupKey(fmt.Sprintf("%d%s.p2p", i, strings.Repeat("c", 1024)), b.id.ID()), Value: "1"})
	}
	sb, _ := batch.SigningBytes()
	batch.Sig = b.id.Sign(sb)
	if err := r.conn.Send(&messages.Envelope{Kind: messages.KindOps, Ops: []*messages.Op{batch}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := a.vv()[b.id.ID()]; got != seq {
			return fmt.Errorf("A holds B's ops up to %d, want %d", got, seq)
		}
		return nil
	})
	waitLog(t, a, "ignoring cleanup", "domains=200")
	lines, longest = 0, 0
	for _, line := range strings.Split(a.logs.String(), "\n") {
		if strings.Contains(line, "ignoring cleanup") {
			lines++
			longest = max(longest, len(line))
		}
	}
	if lines != 1 || longest > 1024 {
		t.Fatalf("A logged %d lines about ignored cleanups, the longest %d bytes", lines, longest)
	}
}
