package peer

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// TestStalledWriterLosesSession: a writer whose session is up begins a
// frame (its length prefix and part of the body) and sends nothing more
// while its connection stays open. The node closes the session once the
// frame's deadline passes (transport.ErrFrameStalled), frees its slot,
// counts it (stalledSessions, a "stalled" connection issue) and keeps
// serving its honest peer.
func TestStalledWriterLosesSession(t *testing.T) {
	nodes := memMesh(t, "A", "B", "E")
	a, b, evil := nodes[0], nodes[1], nodes[2]
	evilID := evil.id
	a.opts.mem.SetFrameTimeout(300 * time.Millisecond) // connections dialed from here on
	conn := impersonateMem(t, evil, a)
	state := func() string { return peerState(t, a, evilID.ID()) }
	testutil.Eventually(t, 10*time.Second, func() error {
		if s := state(); s != "connected" {
			return fmt.Errorf("E is %s on A", s)
		}
		return nil
	})

	raw, ok := conn.(interface{ WriteRaw([]byte) error })
	if !ok {
		t.Fatalf("%T cannot write raw bytes", conn)
	}
	part := binary.BigEndian.AppendUint32(nil, 100)
	if err := raw.WriteRaw(append(part, "the first bytes of 100"...)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if s := state(); s != "disconnected" {
			return fmt.Errorf("E, stalled mid-frame, is %s on A", s)
		}
		return nil
	})
	select {
	case <-conn.Done():
	default:
		t.Fatal("A's end of the stalled connection is closed but E's is not")
	}
	waitLog(t, a, "closing peer connection: frame stalled", "peer="+evilID.ID()[:16])
	d := diag(t, a)
	if d.Summary.StalledSessions != 1 {
		t.Fatalf("stalledSessions = %d, want 1", d.Summary.StalledSessions)
	}
	found := false
	for _, i := range d.ConnectionIssues {
		found = found || (i.Kind == "stalled" && i.PeerID == evilID.ID())
	}
	if !found {
		t.Fatalf("no stalled issue for E in %+v", d.ConnectionIssues)
	}
	if got := a.peerIDs(); len(got) != 1 || got[0] != b.id.ID() {
		t.Fatalf("A's peers = %v, want B alone", shortAll(got))
	}
}

// TestSilentWriterLosesSession: a writer whose session is up sends
// nothing at all afterwards (no frame begun) while its connection stays
// open. Once nothing was heard for CloseSilentAfter the node closes the
// session, frees its slot and counts it as stalled.
func TestSilentWriterLosesSession(t *testing.T) {
	nodes := memMesh(t, "A", "B", "E")
	a, b, evil := nodes[0], nodes[1], nodes[2]
	a.opts.closeSilentAfter = time.Second
	a.restart()
	waitMesh(t, 15*time.Second, a, b, evil)
	conn := impersonateMem(t, evil, a)
	state := func() string { return peerState(t, a, evil.id.ID()) }
	testutil.Eventually(t, 10*time.Second, func() error {
		if s := state(); s != "connected" {
			return fmt.Errorf("E is %s on A", s)
		}
		return nil
	})
	testutil.Eventually(t, 10*time.Second, func() error {
		if s := state(); s != "disconnected" {
			return fmt.Errorf("E, silent, is %s on A", s)
		}
		return nil
	})
	select {
	case <-conn.Done():
	default:
		t.Fatal("A's end of the silent connection is closed but E's is not")
	}
	if d := diag(t, a); d.Summary.StalledSessions != 1 {
		t.Fatalf("stalledSessions = %d, want 1", d.Summary.StalledSessions)
	}
	if got := a.peerIDs(); len(got) != 1 || got[0] != b.id.ID() {
		t.Fatalf("A's peers = %v, want B alone", shortAll(got))
	}
}

// peerState is id's state in a's diagnostics ("unknown" when a lists
// no such peer).
func peerState(t *testing.T, a *testNode, id string) string {
	t.Helper()
	for _, p := range diag(t, a).Peers {
		if p.ID == id {
			return p.State
		}
	}
	return "unknown"
}
