package peer

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// A suspicion counts only when its author signed it, and a replayed one
// that its writer already refuted changes nothing; a real one makes the
// suspect refute it with a fresh heartbeat.
func TestSuspicionsForgedReplayedRefuted(t *testing.T) {
	nodes := overlayNet(t, 3, 4)
	a, b, c := nodes[0], nodes[1], nodes[2]
	waitMesh(t, 10*time.Second, a, b, c)
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
	send := func(s *messages.Suspicion) {
		a.sendFrameTo(b.id.ID(), &messages.Envelope{Kind: messages.KindSuspicions, Overlay: &messages.Overlay{Suspicions: []*messages.Suspicion{s}}})
	}
	// A suspicion of A said to be C's, signed with A's key: forged.
	at := uint64(time.Now().UnixMilli())
	forged := &messages.Suspicion{Writer: a.id.ID(), By: c.id.ID(), At: at, Seq: 1 << 62}
	forged.Sig = a.id.Sign(messages.SuspicionSigningBytes(net.Key, forged))
	send(forged)
	testutil.Eventually(t, 5*time.Second, func() error {
		if o := diag(t, b).Summary.Overlay; o.SuspicionsBad < 1 || o.SuspicionsNew != 0 {
			return fmt.Errorf("suspicions refused %d taken %d, want 1 and 0", o.SuspicionsBad, o.SuspicionsNew)
		}
		return nil
	})
	// A real suspicion of C by A, naming a seq above C's heartbeats so
	// far: taken and forwarded to C, which refutes it.
	real := &messages.Suspicion{Writer: c.id.ID(), By: a.id.ID(), At: at + 1, Seq: uint64(time.Now().UnixMilli())}
	real.Sig = a.id.Sign(messages.SuspicionSigningBytes(net.Key, real))
	send(real)
	testutil.Eventually(t, 5*time.Second, func() error {
		if o := diag(t, c).Summary.Overlay; o.Refutations < 1 {
			return fmt.Errorf("C refuted %d suspicions, want 1", o.Refutations)
		}
		if o := diag(t, b).Summary.Overlay; o.Suspected != 0 {
			return fmt.Errorf("B still suspects %d writers", o.Suspected)
		}
		return nil
	})
	// The same suspicion replayed, and an older one of A's: duplicates,
	// no signature check, nobody suspected.
	dup := diag(t, b).Summary.Overlay.SuspicionsDup
	send(real)
	old := &messages.Suspicion{Writer: c.id.ID(), By: a.id.ID(), At: at}
	old.Sig = a.id.Sign(messages.SuspicionSigningBytes(net.Key, old))
	send(old)
	testutil.Eventually(t, 5*time.Second, func() error {
		o := diag(t, b).Summary.Overlay
		if o.SuspicionsDup < dup+2 {
			return fmt.Errorf("duplicates %d, want %d", o.SuspicionsDup, dup+2)
		}
		if o.Suspected != 0 {
			return fmt.Errorf("B suspects %d writers after a replay", o.Suspected)
		}
		return nil
	})
	// A stale suspicion (two hours old by its author's clock) with a
	// seq no heartbeat refuted: refused.
	bad := diag(t, b).Summary.Overlay.SuspicionsBad
	stale := &messages.Suspicion{Writer: a.id.ID(), By: c.id.ID(), At: uint64(time.Now().Add(-2 * time.Hour).UnixMilli()), Seq: 1 << 62}
	stale.Sig = c.id.Sign(messages.SuspicionSigningBytes(net.Key, stale))
	send(stale)
	testutil.Eventually(t, 5*time.Second, func() error {
		if o := diag(t, b).Summary.Overlay; o.SuspicionsBad <= bad || o.Suspected != 0 {
			return fmt.Errorf("refused %d (was %d), suspected %d", o.SuspicionsBad, bad, o.Suspected)
		}
		return nil
	})
}

// Writers no longer heard (dead for good, or across a partition longer
// than the heartbeat timeout) are dialed past a full view by about
// ActiveView nodes, the drawn ones, not by every node that knows them:
// at 1,000 writers each node's cut-off list holds about ActiveView of
// the 1,000 gone silent, and with no more writers than a view holds it
// holds them all.
func TestCutOffDrawsWritersNoLongerHeard(t *testing.T) {
	for _, tc := range []struct{ writers, lo, hi int }{
		{writers: 11, lo: 11, hi: 11},
		{writers: 1000, lo: 3, hi: 30},
	} {
		a := &Actor{}
		a.d.ActiveView = 12
		a.d.Now = time.Now
		a.hb.init()
		for i := range tc.writers {
			a.hb.latest[fmt.Sprintf("%064x", i)] = 1 // heard once, not since
		}
		if n := len(a.cutOff()); n < tc.lo || n > tc.hi {
			t.Errorf("%d writers no longer heard: %d dialed past a full view, want %d to %d", tc.writers, n, tc.lo, tc.hi)
		}
	}
}

// bridgeTo draws about ActiveView writers of those we know to dial past
// a full view while they stay suspected, and every one of them while we
// know no more writers than a view holds.
func TestBridgeToDrawsAboutAView(t *testing.T) {
	for _, tc := range []struct{ writers, lo, hi int }{
		{writers: 11, lo: 11, hi: 11},
		{writers: 1000, lo: 3, hi: 30},
		{writers: 100, lo: 3, hi: 30},
	} {
		a := &Actor{}
		a.d.ActiveView = 12
		a.hb.init()
		for i := range tc.writers {
			a.hb.latest[fmt.Sprintf("%064x", i)] = 1
		}
		n := 0
		for w := range a.hb.latest {
			if a.bridgeTo(w) {
				n++
			}
		}
		if n < tc.lo || n > tc.hi {
			t.Errorf("%d writers known: %d drawn, want %d to %d", tc.writers, n, tc.lo, tc.hi)
		}
	}
}

// A suspicion names the suspect's latest heartbeat we hold, whose seq is
// its writer's clock in ms, and only a heartbeat with a higher seq
// refutes it. One signed by a writer, fresh, but naming a seq a year
// ahead could never be refuted: the suspect's next heartbeats carry its
// clock. It is refused and counted, and the suspect stays unsuspected.
func TestSuspicionOfAFutureHeartbeatRefused(t *testing.T) {
	nodes := overlayNet(t, 3, 4)
	a, b, c := nodes[0], nodes[1], nodes[2]
	waitMesh(t, 10*time.Second, a, b, c)
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
	before := diag(t, b).Summary.Overlay
	s := &messages.Suspicion{Writer: c.id.ID(), By: a.id.ID(), At: uint64(time.Now().UnixMilli()),
		Seq: uint64(time.Now().AddDate(1, 0, 0).UnixMilli())}
	s.Sig = a.id.Sign(messages.SuspicionSigningBytes(net.Key, s))
	a.sendFrameTo(b.id.ID(), &messages.Envelope{Kind: messages.KindSuspicions, Overlay: &messages.Overlay{Suspicions: []*messages.Suspicion{s}}})
	testutil.Eventually(t, 5*time.Second, func() error {
		o := diag(t, b).Summary.Overlay
		if o.SuspicionsBad <= before.SuspicionsBad || o.SuspicionsNew != before.SuspicionsNew {
			return fmt.Errorf("suspicions refused %d taken %d (were %d, %d): want one more refused", o.SuspicionsBad, o.SuspicionsNew, before.SuspicionsBad, before.SuspicionsNew)
		}
		if o.Suspected != 0 {
			return fmt.Errorf("B suspects %d writers", o.Suspected)
		}
		return nil
	})
}

// How long a suspicion is taken (suspicionTTL) grows with the writers a
// node knows: a node that has heard 20 writers takes one 100 s old, and
// one that just restarted and heard none yet refuses it as stale. So a
// neighbour that greets a restarted node with the suspicions it holds
// sends suspicions the greeted node refuses, in good faith: they are
// not counted against it (maxBadHeartbeats of them would have the
// restarted node drop it).
func TestRestartedNodeKeepsNeighbourWithOlderSuspicions(t *testing.T) {
	nodes := memMesh(t, "A", "B", "C")
	a, b, c := nodes[0], nodes[1], nodes[2]
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
	quiet := addWriters(t, a, b, maxBadHeartbeats+4)
	evil := impersonateMem(t, c, a)
	// Their heartbeats, taken by A (its TTL grows with them) and too old
	// to go in a greeting; then C's suspicions of each, 100 s old.
	now := time.Now()
	var hbs []*messages.Heartbeat
	var ss []*messages.Suspicion
	for _, id := range quiet {
		hb := &messages.Heartbeat{Writer: id.ID(), Seq: uint64(now.Add(-heartbeatMaxAge + 5*time.Second).UnixMilli())}
		hb.Sig = id.Sign(messages.HeartbeatSigningBytes(net.Key, id.ID(), hb.Seq))
		hbs = append(hbs, hb)
		s := &messages.Suspicion{Writer: id.ID(), By: c.id.ID(), At: uint64(now.Add(-100 * time.Second).UnixMilli()), Seq: hb.Seq}
		s.Sig = c.id.Sign(messages.SuspicionSigningBytes(net.Key, s))
		ss = append(ss, s)
	}
	before := diag(t, a).Summary.Overlay
	if err := evil.Send(&messages.Envelope{Kind: messages.KindHeartbeats, Overlay: &messages.Overlay{Heartbeats: hbs}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := diag(t, a).Summary.Overlay.HeartbeatsNew; got < before.HeartbeatsNew+int64(len(quiet)) {
			return fmt.Errorf("A took %d heartbeats, want %d", got-before.HeartbeatsNew, len(quiet))
		}
		return nil
	})
	if err := evil.Send(&messages.Envelope{Kind: messages.KindSuspicions, Overlay: &messages.Overlay{Suspicions: ss}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := diag(t, a).Summary.Overlay.SuspicionsNew; got < before.SuspicionsNew+int64(len(quiet)) {
			return fmt.Errorf("A took %d suspicions, want %d", got-before.SuspicionsNew, len(quiet))
		}
		return nil
	})
	b.restart()
	testutil.Eventually(t, 10*time.Second, func() error {
		o := diag(t, b).Summary.Overlay
		if o.LeavesSent != 0 {
			return fmt.Errorf("B refused %d suspicions of A's greeting and dropped A", o.SuspicionsBad)
		}
		if !slices.Contains(b.peerIDs(), a.id.ID()) {
			return errors.New("B not connected to A again")
		}
		if o.SuspicionsBad < int64(len(quiet)) {
			return fmt.Errorf("B refused %d suspicions of A's greeting as stale, want %d", o.SuspicionsBad, len(quiet))
		}
		return nil
	})
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); <-poll.C {
		if o := diag(t, b).Summary.Overlay; o.LeavesSent != 0 {
			t.Fatalf("B dropped A for the suspicions of its greeting: %+v", o)
		}
	}
	if !slices.Contains(b.peerIDs(), a.id.ID()) {
		t.Fatal("B dropped A after its greeting")
	}
}
