package node

import (
	"testing"

	"peerdns/internal/testutil"
)

// h2spec against the edge's HTTPS port of a node on its defaults:
// every case passes.
func TestEdgeH2Spec(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	_, httpsAddr := n.EdgeAddrs()
	testutil.H2Spec(t, httpsAddr)
}
