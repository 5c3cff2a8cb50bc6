package peer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// TestSessionsAdmitTheirConnections: with room for a single connection
// not admitted yet, peers still join one after the other (an established
// session gives its place back), while a key nobody invited holds the
// place until its handshake ends and the next one is refused and counted.
func TestSessionsAdmitTheirConnections(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{maxPending: 1})
	b := joinNode(t, "B", a)
	// Each join is an inbound connection to A: without B's place back, C
	// could never reach A.
	c := joinNode(t, "C", a)
	waitMesh(t, 15*time.Second, a, b, c)

	stranger := dialRaw(t, mustGenerate(t), a) // says nothing: stays pending
	other, err := transport.Listen(transport.Config{Identity: mustGenerate(t), ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := other.Dial(ctx, a.addr, a.id.ID()); err == nil {
		t.Fatal("a second unknown key connected while the first was pending")
	}
	dg := diag(t, a)
	if dg.Summary.RefusedPending < 1 {
		t.Fatalf("refusedPendingInbound = %d, want at least 1", dg.Summary.RefusedPending)
	}
	found := false
	for _, r := range dg.Recommendations {
		found = found || strings.Contains(r, "flooding the peer port")
	}
	if !found {
		t.Fatalf("recommendations do not mention the refusals: %q", dg.Recommendations)
	}
	// The stranger's handshake times out, which frees the place.
	select {
	case <-stranger.conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the silent stranger was never disconnected")
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := other.Dial(ctx, a.addr, a.id.ID())
		if err != nil {
			return fmt.Errorf("dial after the stranger left: %w", err)
		}
		conn.Close("done")
		return nil
	})
	waitMesh(t, 15*time.Second, a, b, c)
}

func mustGenerate(t *testing.T) *identity.Identity {
	t.Helper()
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return id
}
