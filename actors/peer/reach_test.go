package peer

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

func TestAgreedObservedNeedsTwoPeers(t *testing.T) {
	tests := []struct {
		name     string
		observed map[string]string
		want     []string
	}{
		{"none", map[string]string{}, nil},
		{"one peer alone", map[string]string{"p1": "203.0.113.5:7740"}, nil},
		{"two peers disagree", map[string]string{"p1": "203.0.113.5:7740", "p2": "203.0.113.5:9999"}, nil},
		{"two peers agree", map[string]string{"p1": "203.0.113.5:7740", "p2": "203.0.113.5:7740"}, []string{"203.0.113.5:7740"}},
		{"a liar among agreeing peers", map[string]string{"p1": "203.0.113.5:7740", "p2": "203.0.113.5:7740", "liar": "192.0.2.66:53"},
			[]string{"203.0.113.5:7740"}},
		{"most reported first", map[string]string{"a": "198.51.100.1:1", "b": "198.51.100.1:1", "c": "203.0.113.5:7740", "d": "203.0.113.5:7740", "e": "203.0.113.5:7740"},
			[]string{"203.0.113.5:7740", "198.51.100.1:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := agreedObserved(tt.observed); !slices.Equal(got, tt.want) {
				t.Fatalf("agreedObserved = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClassifyNAT(t *testing.T) {
	local := []string{"198.51.100.2:7740", "127.0.0.1:7740"}
	tests := []struct {
		name       string
		observed   map[string]string
		main, seen string
		want       string
	}{
		{"nothing known", nil, "", "", messages.NATUnknown},
		{"one peer, no probe", map[string]string{"a": "203.0.113.101:7740"}, "", "", messages.NATUnknown},
		{"peer sees our own address", map[string]string{"a": "198.51.100.2:7740"}, "", "", messages.NATPublic},
		{"probe sees our own address", nil, "198.51.100.2:7740", "198.51.100.2:7740", messages.NATPublic},
		{"probe: same mapping to a new destination", map[string]string{"a": "203.0.113.101:7740"}, "203.0.113.101:7740", "203.0.113.101:7740", messages.NATEndpointIndependent},
		{"probe: new port for a new destination", map[string]string{"a": "203.0.113.101:40001"}, "203.0.113.101:40001", "203.0.113.101:51234", messages.NATSymmetric},
		{"two peers see the same address", map[string]string{"a": "203.0.113.101:7740", "b": "203.0.113.101:7740"}, "", "", messages.NATEndpointIndependent},
		{"two peers see different ports", map[string]string{"a": "203.0.113.101:40001", "b": "203.0.113.101:40777"}, "", "", messages.NATSymmetric},
		{"probe without an answer", map[string]string{"a": "203.0.113.101:7740"}, "203.0.113.101:7740", "", messages.NATUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classifyNAT(local, tt.observed, tt.main, tt.seen); got != tt.want {
				t.Fatalf("classifyNAT = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConnectAddrsRules(t *testing.T) {
	known := []string{"198.51.100.2:7740", "peer.example:7740"}
	tests := []struct {
		name    string
		m       messages.Connect
		want    []string
		dropped int
	}{
		{"observation kept", messages.Connect{Observed: "203.0.113.101:7740"}, []string{"203.0.113.101:7740"}, 0},
		{"hello address we hold", messages.Connect{Observed: "203.0.113.101:7740", Addrs: []string{"198.51.100.2:7740"}},
			[]string{"203.0.113.101:7740", "198.51.100.2:7740"}, 0},
		{"address nobody authenticated reported", messages.Connect{Addrs: []string{"192.0.2.99:53"}}, nil, 1},
		{"a name, even one we know", messages.Connect{Addrs: []string{"peer.example:7740"}}, nil, 1},
		{"unspecified, multicast, broadcast, no port", messages.Connect{Observed: "0.0.0.0:7740",
			Addrs: []string{"224.0.0.1:7740", "255.255.255.255:7740", "198.51.100.2:0", "[::]:1"}}, nil, 5},
		{"at most four", messages.Connect{Observed: "203.0.113.1:1", Addrs: []string{"203.0.113.2:1", "203.0.113.3:1", "203.0.113.4:1", "203.0.113.5:1"}},
			[]string{"203.0.113.1:1", "203.0.113.2:1", "203.0.113.3:1", "203.0.113.4:1"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := known
			if strings.HasPrefix(tt.name, "at most") {
				k = append(k, tt.m.Addrs...)
			}
			got, dropped := connectAddrs(&tt.m, k)
			if !slices.Equal(got, tt.want) || dropped != tt.dropped {
				t.Fatalf("connectAddrs = %v (%d dropped), want %v (%d dropped)", got, dropped, tt.want, tt.dropped)
			}
		})
	}
}

func TestPunchRateLimit(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newReachState(now)
	for i := 0; i < punchBurst; i++ {
		if !r.takeToken(now) {
			t.Fatalf("token %d refused within the burst", i)
		}
	}
	if r.takeToken(now) {
		t.Fatal("a punch beyond the burst was allowed")
	}
	later := now.Add(time.Second)
	for i := 0; i < int(punchRate); i++ {
		if !r.takeToken(later) {
			t.Fatalf("after 1 s punch %d refused; %v a second are allowed", i, punchRate)
		}
	}
	if r.takeToken(later) {
		t.Fatalf("after 1 s more than %v punches allowed", punchRate)
	}
}

func reachOf(t *testing.T, n *testNode) *messages.Reach {
	t.Helper()
	return ask[*messages.GetPeerStatusReply](t, n.sys, n.peers, &messages.GetPeerStatus{}).Reach
}

// TestFalseObservedAddressAlone: a writer that reports a false observed
// address changes nothing A advertises; a second peer reporting the same
// address makes it an agreed one.
func TestFalseObservedAddressAlone(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	w1 := joinNode(t, "W1", a)
	w2 := joinNode(t, "W2", a)
	waitMesh(t, 15*time.Second, a, w1, w2)
	const lie = "192.0.2.66:7740"
	net := ask[*messages.GetNetworkReply](t, a.sys, a.ledger, &messages.GetNetwork{})
	w1.stop()
	w2.stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(a.peerIDs()) != 0 {
			return errors.New("A still sees the stopped writers")
		}
		return nil
	})
	// W1 and W2's keys on raw endpoints, each saying A is at lie.
	liar := func(w *testNode) *rawPeer {
		r := dialRaw(t, w.id, a)
		r.conn.Send(&messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: w.id.ID(), Network: net.Key, Root: net.Root, Observed: lie}})
		r.recvKind(t, messages.KindAccept)
		r.conn.Send(&messages.Envelope{Kind: messages.KindAccept, Accept: &messages.Accept{}})
		return r
	}
	liar(w1)
	testutil.Eventually(t, 10*time.Second, func() error {
		re := reachOf(t, a)
		if len(re.Observed) != 1 || re.Observed[0].Addr != lie || re.Observed[0].Reporters != 1 {
			return fmt.Errorf("observed %+v", re.Observed)
		}
		return nil
	})
	if re := reachOf(t, a); slices.Contains(re.Advertised, lie) {
		t.Fatalf("one peer's report made A advertise %s: %v", lie, re.Advertised)
	}
	// A fresh invite carries only what A advertises.
	if addrs := inviteAddrs(t, a); slices.Contains(addrs, lie) {
		t.Fatalf("invite carries the lone report: %v", addrs)
	}
	liar(w2)
	testutil.Eventually(t, 10*time.Second, func() error {
		if re := reachOf(t, a); !slices.Contains(re.Advertised, lie) || re.Advertised[0] != lie {
			return fmt.Errorf("two agreeing peers, advertised %v", re.Advertised)
		}
		return nil
	})
	if addrs := inviteAddrs(t, a); len(addrs) == 0 || addrs[0] != lie {
		t.Fatalf("invite after two agreeing peers: %v", addrs)
	}
}

func inviteAddrs(t *testing.T, n *testNode) []string {
	t.Helper()
	inv, err := transport.ParseInvite(n.invite(0))
	if err != nil {
		t.Fatal(err)
	}
	return inv.Addrs
}

// TestAdvertiseAddrFirst: addresses named by hand come first in hellos,
// invites and the reach view, before the interface addresses.
func TestAdvertiseAddrFirst(t *testing.T) {
	// Loopback, so a dial to it stays on this machine, and a port nothing
	// listens on (a fixed one could be a node of another test package).
	pc, err := net.ListenPacket("udp", "127.0.0.9:0")
	if err != nil {
		t.Fatal(err)
	}
	manual := pc.LocalAddr().String()
	pc.Close()
	a := newTestNode(t, "A", nodeOpts{advertise: []string{manual}})
	// Nothing answers at the manual address, and one join dial at a time
	// goes to the inviter (each waits out its handshake timeout): B is
	// also given A's real address as a bootstrap, dialed beside them.
	// The bound covers one handshake timeout under a loaded -race run.
	b := newTestNode(t, "B", nodeOpts{join: a.invite(0), bootstrap: []string{a.addr}})
	waitMesh(t, 45*time.Second, a, b)
	if addrs := inviteAddrs(t, a); len(addrs) < 2 || addrs[0] != manual {
		t.Fatalf("invite addresses %v, want %s first and the interface addresses after", addrs, manual)
	}
	re := reachOf(t, a)
	if !slices.Equal(re.Manual, []string{manual}) || re.Advertised[0] != manual {
		t.Fatalf("reach %+v", re)
	}
	// B heard it in A's hello and keeps it among A's addresses.
	d := ask[*messages.PeerDiagnosticsReply](t, b.sys, b.peers, &messages.GetPeerDiagnostics{})
	for _, p := range d.Peers {
		if p.ID == a.id.ID() {
			if !slices.Contains(p.Addrs, manual) || p.Path != "direct" {
				t.Fatalf("B's view of A: %+v", p)
			}
			return
		}
	}
	t.Fatal("B does not list A")
}

// TestConnectRefusals: connect messages that name a non-writer, this
// node, a bad id, or only addresses no authenticated peer reported are
// refused and counted, and no punch starts; a valid one punches once
// even when it arrives twice.
func TestConnectRefusals(t *testing.T) {
	a := newTestNode(t, "A", nodeOpts{})
	w := joinNode(t, "W", a)
	c := joinNode(t, "C", a)
	waitMesh(t, 15*time.Second, a, w, c)
	c.stop() // a writer A is not connected to
	r := impersonate(t, w, a)
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(a.peerIDs()) != 1 {
			return errors.New("raw W not connected")
		}
		return nil
	})
	stranger, _ := identity.Generate()
	send := func(m *messages.Connect) {
		t.Helper()
		if err := r.conn.Send(&messages.Envelope{Kind: messages.KindConnect, Connect: m}); err != nil {
			t.Fatal(err)
		}
	}
	wantRefused := func(n int64, reason string) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, func() error {
			if re := reachOf(t, a); re.RefusedConnects != n {
				return fmt.Errorf("refused %d, want %d", re.RefusedConnects, n)
			}
			return nil
		})
		waitLog(t, a, "refused a connect message", reason)
		if re := reachOf(t, a); re.Punches != 0 {
			t.Fatalf("%d punches after a refused connect", re.Punches)
		}
	}
	send(&messages.Connect{Peer: stranger.ID(), Observed: "127.0.0.1:9"})
	wantRefused(1, "not a writer")
	send(&messages.Connect{Peer: a.id.ID(), Observed: "127.0.0.1:9"})
	wantRefused(2, "this node or its sender")
	send(&messages.Connect{Peer: "not-an-id", Observed: "127.0.0.1:9"})
	wantRefused(3, "invalid peer id")
	send(&messages.Connect{Peer: c.id.ID(), Addrs: []string{"192.0.2.99:53", "victim.example:53"}})
	wantRefused(4, "no address an authenticated peer reported")

	// A valid introduction of C: A punches its observed address once. The
	// same introduction again within a second never punches twice: it is
	// over the rate limit when it comes before the first one's punch has
	// begun (A still asks its ledger whether both are writers), and taken
	// as the same introduction (both sides asked) once the punch runs.
	valid := &messages.Connect{Peer: c.id.ID(), Observed: "127.0.0.1:9"}
	send(valid)
	send(valid)
	var refused int64
	testutil.Eventually(t, 10*time.Second, func() error {
		re := reachOf(t, a)
		if re.Punches != 1 || (re.RefusedConnects != 4 && re.RefusedConnects != 5) {
			return fmt.Errorf("punches %d, refused %d; want 1 and 4 or 5", re.Punches, re.RefusedConnects)
		}
		refused = re.RefusedConnects
		return nil
	})
	if refused == 5 {
		waitLog(t, a, "refused a connect message", "rate limit")
	}
}

// TestIntroductionsSpendTheViewsRoom: a node asks for no more
// introductions at once than its view has room for, counting requests
// within introAnswer and running punches, each until its peer has a
// session; the peer asked about is not counted against itself. Dials of
// our own are bounded by the dial gate and do not count here.
func TestIntroductionsSpendTheViewsRoom(t *testing.T) {
	now := time.Unix(1000, 0)
	d := Deps{ActiveView: 3, Mesh: NewMesh(), Now: func() time.Time { return now }}
	d.defaults()
	a := &Actor{d: d, sessions: map[string]*sessionEntry{"n1": {up: true}}, reach: newReachState(now), gate: newDialGate(2, d.Now)}
	ask := func(id string) {
		a.reach.intros[id] = &introState{asked: now}
	}
	if !a.introRoom("x", now) {
		t.Fatal("room 2, nothing on its way: an introduction to x refused")
	}
	ask("x")
	if !a.introRoom("x", now) || !a.introRoom("y", now) {
		t.Fatal("room 2, one request on its way: x again or y refused")
	}
	ask("y")
	if a.introRoom("z", now) {
		t.Fatal("room 2, two requests on their way: a third allowed")
	}
	// A request unanswered for introAnswer no longer counts; a running
	// punch to it does.
	now = now.Add(introAnswer)
	if !a.introRoom("z", now) {
		t.Fatal("both requests past introAnswer: z refused")
	}
	a.reach.punching["x"] = &punchState{addrs: map[string]bool{"192.0.2.1:7740": true}}
	a.reach.punching["y"] = &punchState{addrs: map[string]bool{"192.0.2.2:7740": true}}
	if a.introRoom("z", now) {
		t.Fatal("two punches on their way with room 2: z allowed")
	}
	if !a.introRoom("y", now) {
		t.Fatal("the punch to y is not counted against an introduction to y")
	}
	// x's session is up: a neighbour now, no longer on its way; the
	// view's room is 1 and y's punch still runs.
	a.sessions["x"] = &sessionEntry{up: true}
	if a.introRoom("z", now) {
		t.Fatal("room 1 and a punch on its way: z allowed")
	}
	a.reach.punching["y"].addrs = map[string]bool{} // the punch dialer stopped
	if !a.introRoom("z", now) {
		t.Fatal("room 1, nothing on its way: z refused")
	}
	a.gate.hold("z", now.Add(leaveHold))
	if a.introRoom("z", now) {
		t.Fatal("z left a moment ago: an introduction allowed")
	}
}

// A Connect naming a peer we do not know as a writer is checked with
// the ledger, at most maxWriterAsks at a time, and the answer is kept:
// a writer that sent a thousand Connects naming made-up peers made us
// ask the ledger two questions for each at once (a flood of them, a
// flood of questions queued before the ledger's own work), and kept a
// rate-limit entry for each for a minute.
func TestConnectsNamingStrangersAskLedgerBounded(t *testing.T) {
	r := newSessionsRig(t)
	from := strings.Repeat("1", 64)
	r.writers = []string{from}
	r.run(func(c actor.Context) { r.a.sessions[from] = &sessionEntry{up: true, pid: c.Self()} })
	const n = 1000
	send := func() {
		r.run(func(c actor.Context) {
			for i := range n {
				r.a.onConnect(c, from, &messages.Connect{Peer: fmt.Sprintf("%064x", i+2), Observed: "127.0.0.1:9"})
			}
		})
	}
	refused := func(want int64) {
		testutil.Eventually(t, 5*time.Second, func() error {
			var got int64
			r.run(func(actor.Context) { got = r.a.reach.refused })
			if got != want {
				return fmt.Errorf("refused %d connects, want %d", got, want)
			}
			return nil
		})
	}
	send()
	refused(n)
	if asks := r.isWriterAsks.Load(); asks > maxWriterAsks {
		t.Fatalf("%d connects naming strangers made %d ledger questions, want at most %d", n, asks, maxWriterAsks)
	}
	r.run(func(actor.Context) {
		if got := len(r.a.reach.lastConnect); got > maxWriterAsks {
			t.Errorf("%d rate-limit entries kept for connects naming strangers", got)
		}
	})
	// The same strangers again: answered from what the ledger said.
	before := r.isWriterAsks.Load()
	send()
	refused(2 * n)
	if asks := r.isWriterAsks.Load() - before; asks > maxWriterAsks {
		t.Fatalf("the same %d connects again made %d ledger questions", n, asks)
	}
}
