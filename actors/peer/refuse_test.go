package peer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"peerdns/internal/identity"
	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
)

// waitLog waits until n logged a line containing every part.
func waitLog(t *testing.T, n *testNode, parts ...string) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, func() error {
		for _, line := range strings.Split(n.logs.String(), "\n") {
			ok := true
			for _, p := range parts {
				if !strings.Contains(line, p) {
					ok = false
					break
				}
			}
			if ok {
				return nil
			}
		}
		return fmt.Errorf("%s has no log line with %q", n.name, parts)
	})
}

func diag(t *testing.T, n *testNode) *messages.PeerDiagnosticsReply {
	return ask[*messages.PeerDiagnosticsReply](t, n.sys, n.peers, &messages.GetPeerDiagnostics{})
}

func TestReusedInviteRefused(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	inv := a.invite(0)
	b := newTestNode(t, "B", nodeOpts{join: inv})
	waitMesh(t, 15*time.Second, a, b)
	d := newTestNode(t, "D", nodeOpts{join: inv})
	waitLog(t, a, "refusing invite", "code="+messages.RefuseInviteUsed)
	waitLog(t, d, "peer refused the connection", "code="+messages.RefuseInviteUsed)
	if a.isWriter(d.id.ID()) {
		t.Fatal("D became a writer with a used invite")
	}
	if got := d.peerIDs(); len(got) != 0 {
		t.Fatalf("D connected to %v", shortAll(got))
	}
	if st := ask[*messages.GetPeerStatusReply](t, d.sys, d.peers, &messages.GetPeerStatus{}); !st.Joining || st.Network != "" {
		t.Fatalf("D status = %+v, want still joining", st)
	}
	// B restarted with the same invite on the command line is fine: the
	// ledger already knows the network, so the invite is ignored.
	b.stop()
	b.opts.bootstrap = nil
	b.start()
	waitMesh(t, 15*time.Second, a, b)
	dg := diag(t, a)
	if dg.Summary.InvitesRedeemed != 1 || dg.Summary.InvitesRefused < 1 {
		t.Fatalf("A diagnostics summary = %+v", dg.Summary)
	}
	found := false
	for _, i := range dg.ConnectionIssues {
		if i.PeerID == d.id.ID() && strings.Contains(i.Reason, messages.RefuseInviteUsed) {
			found = true
		}
	}
	if !found {
		t.Fatalf("A connectionIssues lack D's refusal: %+v", dg.ConnectionIssues)
	}
}

func TestExpiredInviteRefusedByInviter(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	inv := a.invite(time.Minute)
	// The joiner's clock is behind, so it does not notice the invite has
	// expired; the inviter must refuse it.
	past := func() time.Time { return time.Now().Add(-time.Hour) }
	a.stop()
	a.opts.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	a.start()
	d := newTestNode(t, "D", nodeOpts{join: inv, now: past})
	waitLog(t, a, "refusing invite", "code="+messages.RefuseInviteExpired)
	waitLog(t, d, "peer refused the connection", "code="+messages.RefuseInviteExpired)
	if a.isWriter(d.id.ID()) {
		t.Fatal("D became a writer with an expired invite")
	}
}

func TestBadInviteNeverDials(t *testing.T) {
	d := newTestNode(t, "D", nodeOpts{join: "not-an-invite"})
	waitLog(t, d, "cannot join: bad invite")
	// Ticks keep asking the ledger; the issue is recorded once, not per tick.
	testutil.Eventually(t, 5*time.Second, func() error {
		if dg := diag(t, d); dg.Summary.ConnectionAttempts != 0 || len(dg.ConnectionIssues) != 1 {
			return fmt.Errorf("attempts %d, issues %+v", dg.Summary.ConnectionAttempts, dg.ConnectionIssues)
		}
		return nil
	})
	dg := diag(t, d)
	if dg.Ready || len(dg.Recommendations) == 0 || !strings.Contains(dg.Recommendations[0], "invite") {
		t.Fatalf("diagnostics = ready %v, recommendations %v", dg.Ready, dg.Recommendations)
	}
	if st := ask[*messages.GetPeerStatusReply](t, d.sys, d.peers, &messages.GetPeerStatus{}); st.Ready || !st.Listening {
		t.Fatalf("status = %+v, want listening but not ready", st)
	}
}

func TestForeignNetworkRefused(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	// E is master of its own network and bootstraps to A.
	e := newTestNode(t, "E", nodeOpts{bootstrap: []string{a.addr}})
	waitLog(t, a, "refusing peer", "code="+messages.RefuseForeignNetwork)
	waitLog(t, e, "refusing peer", "code="+messages.RefuseForeignNetwork)
	if len(a.peerIDs()) != 0 || len(e.peerIDs()) != 0 {
		t.Fatal("nodes of different networks connected")
	}
}

// rawPeer speaks the peer protocol by hand over a real endpoint with the
// given identity, so a test can act as a misbehaving peer.
type rawPeer struct {
	conn transport.Conn
}

func dialRaw(t *testing.T, id *identity.Identity, to *testNode) *rawPeer {
	t.Helper()
	to.waitReady()
	ep, err := transport.Listen(transport.Config{Identity: id, ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := ep.Dial(ctx, to.addr, to.id.ID())
	if err != nil {
		t.Fatal(err)
	}
	return &rawPeer{conn: c}
}

// recvKind reads frames until one of kind arrives.
func (r *rawPeer) recvKind(t *testing.T, kind string) *messages.Envelope {
	t.Helper()
	for {
		m, err := r.conn.Recv()
		if err != nil {
			t.Fatalf("waiting for %s: %v", kind, err)
		}
		if m.Kind == kind {
			return m
		}
	}
}

func TestNonWriterRefused(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
	// F claims A's network but was never invited.
	f, _ := identity.Generate()
	r := dialRaw(t, f, a)
	if err := r.conn.Send(&messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: f.ID(), Network: net.Key, Root: net.Root}}); err != nil {
		t.Fatal(err)
	}
	ref := r.recvKind(t, messages.KindRefuse)
	if ref.Refuse.Code != messages.RefuseNotWriter {
		t.Fatalf("refusal = %+v, want %s", ref.Refuse, messages.RefuseNotWriter)
	}
	waitLog(t, a, "refusing peer", "code="+messages.RefuseNotWriter)
	select {
	case <-r.conn.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("refused connection not closed")
	}
}

func TestForgedOpRejectedAndGarbageDisconnected(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	waitMesh(t, 15*time.Second, a, b)
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})

	// B's key on a raw endpoint: a writer that misbehaves. A replaces B's
	// real session with this one (B dialed both: newest wins).
	b.stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(a.peerIDs()) != 0 {
			return errors.New("A still sees B")
		}
		return nil
	})
	r := dialRaw(t, b.id, a)
	r.conn.Send(&messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: b.id.ID(), Network: net.Key, Root: net.Root}})
	r.recvKind(t, messages.KindAccept)
	r.conn.Send(&messages.Envelope{Kind: messages.KindAccept, Accept: &messages.Accept{}})
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(a.peerIDs()) != 1 {
			return errors.New("raw B not connected")
		}
		return nil
	})
	// An op claiming to be A's, signed by B.
	forged := &messages.Op{Writer: a.id.ID(), Seq: a.vv()[a.id.ID()] + 1, HLC: messages.HLC{Wall: time.Now().UnixMilli()}, Key: messages.ClaimKey("forged.p2p", a.id.ID()), Value: `{"hash":"` + hash('f') + `"}`}
	sb, _ := forged.SigningBytes()
	forged.Sig = b.id.Sign(sb)
	if err := r.conn.Send(&messages.Envelope{Kind: messages.KindOps, Ops: []*messages.Op{forged}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		m := ask[*messages.GetConsensusMetricsReply](t, a.sys, a.ledger, &messages.GetConsensusMetrics{}).Metrics
		if m.ValidationFailures < 1 {
			return errors.New("no validation failure counted")
		}
		return nil
	})
	if _, ok := a.domains()["forged.p2p"]; ok {
		t.Fatal("forged claim reached the view")
	}

	// A hello after the handshake breaks the protocol. (Undecodable and
	// oversize frames are closed by the transport itself: see
	// TestGarbageFramesDisconnectPeer.)
	r.conn.Send(&messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: b.id.ID(), Network: net.Key}})
	select {
	case <-r.conn.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("peer breaking the protocol not disconnected")
	}
	waitLog(t, a, "protocol violation", "unexpected hello after handshake")
	// A keeps serving: a new joiner gets in and replicates.
	c := joinNode(t, "C", a)
	a.addDomain("after.p2p", hash('e'))
	waitConverged(t, 15*time.Second, a, c)
}

func TestGapMakesNodeAskWant(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	b := joinNode(t, "B", a)
	waitMesh(t, 15*time.Second, a, b)
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
	have := b.vv()[b.id.ID()]
	b.stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(a.peerIDs()) != 0 {
			return errors.New("A still sees B")
		}
		return nil
	})
	r := dialRaw(t, b.id, a)
	r.conn.Send(&messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: b.id.ID(), Network: net.Key, Root: net.Root}})
	r.recvKind(t, messages.KindAccept)
	r.conn.Send(&messages.Envelope{Kind: messages.KindAccept, Accept: &messages.Accept{}})
	// B's op have+2 without have+1: A's ledger sees a gap and A asks.
	op := &messages.Op{Writer: b.id.ID(), Seq: have + 2, HLC: messages.HLC{Wall: time.Now().UnixMilli()},
		Key: messages.ClaimKey("gap.p2p", b.id.ID()), Value: `{"hash":"` + hash('g') + `"}`}
	sb, _ := op.SigningBytes()
	op.Sig = b.id.Sign(sb)
	r.conn.Send(&messages.Envelope{Kind: messages.KindOps, Ops: []*messages.Op{op}})
	want := r.recvKind(t, messages.KindWant)
	if got := want.VV[b.id.ID()]; got != have {
		t.Fatalf("want vv[B] = %d, want %d", got, have)
	}
	testutil.Eventually(t, 5*time.Second, func() error { // stats reach the supervisor on ticks
		if d := diag(t, a); d.Summary.GapRepairs < 1 {
			return fmt.Errorf("gapRepairs = %d", d.Summary.GapRepairs)
		}
		return nil
	})
}
