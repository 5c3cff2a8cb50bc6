package rpc

import (
	"encoding/binary"
	"testing"
	"time"
)

// TestReplayGuardShareOfOnePeer: the nonces are bounded, and one allowed
// peer of any role filling them (a viewer or a child calling as fast as
// it can, refused or not) must not lock every other peer out, the admins
// included, for the window.
func TestReplayGuardShareOfOnePeer(t *testing.T) {
	g := newReplayGuard(ReplayWindow)
	now := time.Unix(1_700_000_000, 0)
	nonce := func(i int) []byte { return binary.BigEndian.AppendUint64(make([]byte, 8), uint64(i)) }
	const viewer, admin = "viewer-key", "admin-key"
	full := false
	for i := 0; i < maxNonces && !full; i++ {
		switch g.check(viewer, nonce(i), now, now) {
		case replayOK:
		case replayFull:
			full = true
		default:
			t.Fatalf("viewer nonce %d refused as a replay", i)
		}
	}
	if !full {
		t.Errorf("one peer held all %d nonces", maxNonces)
	}
	if r := g.check(admin, nonce(0), now, now); r != replayOK {
		t.Errorf("admin after a viewer's flood: %v, want replayOK", r)
	}
	if r := g.check(admin, nonce(0), now, now); r != replaySeen {
		t.Errorf("admin's replay: %v, want replaySeen", r)
	}
	// The window passes: the viewer's nonces expire and it may call again.
	later := now.Add(2*ReplayWindow + time.Second)
	if r := g.check(viewer, nonce(maxNonces), later, later); r != replayOK {
		t.Errorf("viewer after the window: %v, want replayOK", r)
	}
}
