package scale

import (
	"testing"
)

// TestSparseNetworkConverges runs the harness small: 12 nodes that each
// reach 3 others, 20 claims on node 0. Every node must apply and resolve
// them through relays, no frame may cross a link the topology lacks, and
// the meter must have counted the ops.
func TestSparseNetworkConverges(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 12 nodes")
	}
	r := measure(t, simConfig{nodes: 12, degree: 3}, 20)
	if r.diameter < 2 {
		t.Fatalf("diameter %d: the graph is not sparse", r.diameter)
	}
	if r.offLink != 0 {
		t.Fatalf("%d frames crossed links the topology lacks", r.offLink)
	}
	if r.opsB <= 0 || r.claimB <= 0 || r.vvEntries != 12 {
		t.Fatalf("meter or vector empty: %+v", r)
	}
	t.Logf("applied %v, resolved %v, %.0f B per write per node", r.applied, r.resolved, r.opsB)
}

// TestTopology checks the graphs the simulation uses.
func TestTopology(t *testing.T) {
	full := fullMesh(5)
	if got := len(full.neighbours(2)); got != 4 || full.diameter() != 1 || full.linked(1, 1) {
		t.Fatalf("full mesh of 5: %d neighbours, diameter %d", got, full.diameter())
	}
	sp := sparse(200, 8, 1)
	for i := 0; i < 200; i++ {
		nb := sp.neighbours(i)
		if len(nb) < 2 || len(nb) > 8 {
			t.Fatalf("node %d has %d neighbours, want 2..8", i, len(nb))
		}
		for _, j := range nb {
			if !sp.linked(j, i) {
				t.Fatalf("link %d-%d not symmetric", i, j)
			}
		}
	}
	if d := sp.diameter(); d < 2 || d > 8 {
		t.Fatalf("diameter %d of a 200-node degree-8 graph", d)
	}
}
