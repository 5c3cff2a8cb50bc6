package peer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
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

// waitFatal waits for n's supervisor to report a join that cannot heal,
// and checks it names the reason (want) and wraps the invite error.
func waitFatal(t *testing.T, n *testNode, want string, is error) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, func() error {
		if len(n.fatals.all()) == 0 {
			return fmt.Errorf("%s reported nothing fatal", n.name)
		}
		return nil
	})
	checkOneFatal(t, n, want, is)
}

// checkOneFatal checks n reported exactly one fatal error, the one wanted.
func checkOneFatal(t *testing.T, n *testNode, want string, is error) {
	t.Helper()
	errs := n.fatals.all()
	if len(errs) != 1 {
		t.Fatalf("%s Fatal called %d times: %v", n.name, len(errs), errs)
	}
	if msg := errs[0].Error(); !strings.HasPrefix(msg, "join: ") || !strings.Contains(msg, want) || !errors.Is(errs[0], is) {
		t.Fatalf("%s Fatal(%q), want a join error naming %q and wrapping %v", n.name, msg, want, is)
	}
}

// checkGaveUp checks n stopped joining: not joining, not ready, and
// (ticks kept coming meanwhile) still exactly one fatal report.
func checkGaveUp(t *testing.T, n *testNode, want string, is error) {
	t.Helper()
	// Ticks sent here are handled before the status question after them:
	// the supervisor has had every chance to report again.
	for range 5 {
		n.sys.Root.Send(n.peers, &tick{now: time.Now()})
	}
	if st := ask[*messages.GetPeerStatusReply](t, n.sys, n.peers, &messages.GetPeerStatus{}); st.Joining || st.Ready || st.Network != "" {
		t.Fatalf("%s status = %+v, want neither joining nor ready", n.name, st)
	}
	checkOneFatal(t, n, want, is)
	dg := diag(t, n)
	if len(dg.Recommendations) == 0 || !strings.Contains(dg.Recommendations[0], want) {
		t.Fatalf("%s recommendations = %q, want the reason %q first", n.name, dg.Recommendations, want)
	}
}

func TestReusedInviteRefused(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	inv := a.invite(0)
	b := newTestNode(t, "B", nodeOpts{join: inv})
	waitMesh(t, 15*time.Second, a, b)
	d := newTestNode(t, "D", nodeOpts{join: inv})
	waitLog(t, a, "refusing invite", "code="+messages.RefuseInviteUsed)
	waitLog(t, d, "peer refused the connection", "code="+messages.RefuseInviteUsed)
	waitFatal(t, d, "invite already used", transport.ErrInviteUsed)
	if a.isWriter(d.id.ID()) {
		t.Fatal("D became a writer with a used invite")
	}
	if got := d.peerIDs(); len(got) != 0 {
		t.Fatalf("D connected to %v", shortAll(got))
	}
	checkGaveUp(t, d, "invite already used", transport.ErrInviteUsed)
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
	checkOneFatal(t, d, "invite already used", transport.ErrInviteUsed)
	if n := len(b.fatals.all()); n != 0 {
		t.Fatalf("B, which joined, reported %d fatal errors", n)
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
	waitFatal(t, d, "invite expired at", transport.ErrInviteExpired)
	checkOneFatal(t, d, "(refused by the inviter "+short(a.id.ID())+")", transport.ErrInviteExpired)
	if a.isWriter(d.id.ID()) {
		t.Fatal("D became a writer with an expired invite")
	}
	checkGaveUp(t, d, "invite expired at", transport.ErrInviteExpired)
}

// Invites that cannot work however often the node dials stop it before
// any dial: the node reports why once and never becomes ready.
func TestUnusableInviteNeverDials(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	expiring := a.invite(time.Minute)
	inv, err := transport.ParseInvite(expiring)
	if err != nil {
		t.Fatal(err)
	}
	expiredAt := time.UnixMilli(inv.ExpiresAt).UTC().Format(time.RFC3339)
	inv.Sig[0] ^= 1
	tampered, err := inv.Encode()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		invite string
		now    func() time.Time
		want   string
		is     error
	}{
		{"malformed", "not-an-invite", nil, "invalid invite", transport.ErrInviteInvalid},
		{"bad signature", tampered, nil, "invalid invite: bad inviter signature", transport.ErrInviteInvalid},
		{"expired", expiring, func() time.Time { return time.Now().Add(2 * time.Minute) }, "invite expired at " + expiredAt, transport.ErrInviteExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newTestNode(t, "D", nodeOpts{join: tt.invite, now: tt.now})
			waitFatal(t, d, tt.want, tt.is)
			waitLog(t, d, "cannot join the network", tt.want)
			checkGaveUp(t, d, tt.want, tt.is)
			dg := diag(t, d)
			if dg.Summary.ConnectionAttempts != 0 || len(dg.ConnectionIssues) != 1 || dg.ConnectionIssues[0].Kind != "invite" {
				t.Fatalf("attempts %d, issues %+v; want no dial and one invite issue", dg.Summary.ConnectionAttempts, dg.ConnectionIssues)
			}
			if st := ask[*messages.GetPeerStatusReply](t, d.sys, d.peers, &messages.GetPeerStatus{}); !st.Listening {
				t.Fatalf("status = %+v, want listening", st)
			}
		})
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

// impersonate stops writer w and connects to a with w's key on a raw
// endpoint, past hello and accept: a writer that sends whatever the test
// wants, which the real session would never send.
func impersonate(t *testing.T, w, a *testNode) *rawPeer {
	t.Helper()
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
	w.stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(a.peerIDs()) != 0 {
			return errors.New("A still sees the stopped writer")
		}
		return nil
	})
	r := dialRaw(t, w.id, a)
	r.conn.Send(&messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: w.id.ID(), Network: net.Key, Root: net.Root}})
	r.recvKind(t, messages.KindAccept)
	r.conn.Send(&messages.Envelope{Kind: messages.KindAccept, Accept: &messages.Accept{}})
	return r
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
	// B's key on a raw endpoint: a writer that misbehaves.
	r := impersonate(t, b, a)
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
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
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

// A ledger that restarted (a failed write restarts it; it publishes
// LedgerLoaded once it has loaded from disk) lost the ops it had not
// committed: every session asks its peer again with a want. An idle
// mesh sends none otherwise.
func TestLedgerLoadedAsksPeersAgain(t *testing.T) {
	b := memMesh(t, "A", "B", "C")[1]
	before := diag(t, b).Summary.GapRepairs
	b.sys.EventStream.Publish(&messages.LedgerLoaded{})
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := diag(t, b).Summary.GapRepairs - before; got < 2 {
			return fmt.Errorf("B sent %d wants since its ledger loaded, want one to each of its 2 peers", got)
		}
		return nil
	})
}
