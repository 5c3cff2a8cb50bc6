package peer

import (
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/store"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// livenessRig runs a peers supervisor's liveness bookkeeping inside a
// real actor (so it has a context to send from) without sessions or
// endpoint: run hands a function the actor's context, and sets returns
// every PeerSetChanged the supervisor sent its ledger, in order.
type livenessRig struct {
	t    *testing.T
	sys  *actor.ActorSystem
	a    *Actor
	pid  *actor.PID
	sets chan []string
	// writers is what the fake ledger answers GetWriters with; set it
	// before anything asks.
	writers []string
	// isWriterAsks counts the IsWriter questions the ledger got.
	isWriterAsks atomic.Int64
}

func newLivenessRig(t *testing.T, self *identity.Identity, network string) *livenessRig {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	r := &livenessRig{t: t, sys: sys, sets: make(chan []string, 64)}
	t.Cleanup(r.sys.Shutdown)
	ledger := r.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.PeerSetChanged:
			r.sets <- m.Connected
		case *messages.GetWriters:
			c.Respond(&messages.GetWritersReply{IDs: r.writers})
		case *messages.IsWriter:
			r.isWriterAsks.Add(1)
			c.Respond(&messages.IsWriterReply{OK: slices.Contains(r.writers, m.ID)})
		}
	}))
	d := Deps{Identity: self, Ledger: ledger, Log: quiet}
	d.defaults()
	r.a = newActor(d)
	r.a.network, r.a.sys = network, r.sys
	r.a.sessions = map[string]*sessionEntry{}
	r.a.lingering = map[string]time.Time{}
	r.a.gate = newDialGate(d.ActiveView, d.Now)
	r.a.hb.init()
	r.a.sus.init()
	r.pid = r.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if f, ok := c.Message().(func(actor.Context)); ok {
			defer func() {
				// A panic here would restart this actor and leave run
				// waiting; it goes back to the test instead.
				c.Respond(recover())
			}()
			f(c)
		}
	}))
	return r
}

// newSessionsRig is a livenessRig whose supervisor can also start and
// end sessions: a node store and address book for the peers it
// remembers, reach state, and an endpoint whose addresses a leave's
// sample names.
func newSessionsRig(t *testing.T) *livenessRig {
	t.Helper()
	self, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	r := newLivenessRig(t, self, "net")
	node, err := store.Open(filepath.Join(t.TempDir(), "node.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	ep := transport.NewMemNetwork().Listen(self, r.a.d.Log)
	t.Cleanup(func() { ep.Close() })
	r.a.d.Node, r.a.d.Endpoint = node, ep
	r.a.known, r.a.reach = map[string]*knownPeer{}, newReachState(time.Now())
	return r
}

// run calls f inside the actor and waits for it to return.
func (r *livenessRig) run(f func(c actor.Context)) {
	r.t.Helper()
	res, err := r.sys.Root.RequestFuture(r.pid, f, 5*time.Second).Result()
	if err != nil {
		r.t.Fatal(err)
	}
	if res != nil {
		r.t.Fatalf("panic: %v", res)
	}
}

// waitSet waits until the latest set the supervisor sent its ledger
// satisfies ok, and returns it.
func (r *livenessRig) waitSet(what string, ok func([]string) bool) []string {
	r.t.Helper()
	var last []string
	deadline := time.After(5 * time.Second)
	for {
		select {
		case last = <-r.sets:
			if ok(last) {
				return last
			}
		case <-deadline:
			r.t.Fatalf("%s: the ledger was last told %v (the supervisor counts %v)", what, shortAll(last), shortAll(r.a.activeIDs()))
			return nil
		}
	}
}

// A writer heard only by heartbeat that a suspicion counted out comes
// back into the set the ledger counts as soon as a heartbeat that
// refutes the suspicion arrives: the refutation must reach the quorum,
// not only the bookkeeping (a node once kept a live writer out of its
// quorum for minutes that way).
func TestRefutingHeartbeatReachesTheLedger(t *testing.T) {
	ids := newIdentities(t, 3)
	self, w, by := ids[0], ids[1], ids[2]
	const network = "net"
	r := newLivenessRig(t, self, network)
	beat := func(seq uint64) *messages.Heartbeat {
		hb := &messages.Heartbeat{Writer: w.ID(), Seq: seq}
		hb.Sig = w.Sign(messages.HeartbeatSigningBytes(network, w.ID(), seq))
		return hb
	}
	now := uint64(time.Now().UnixMilli())
	r.run(func(c actor.Context) {
		r.a.hb.writers[w.ID()], r.a.hb.writers[by.ID()] = true, true
		r.a.onHeartbeats(c, by.ID(), []*messages.Heartbeat{beat(now - 2000)}, false)
		if r.a.hb.taken != 1 {
			t.Error("first heartbeat refused")
		}
	})
	in := func(s []string) bool { return slices.Contains(s, w.ID()) }
	r.waitSet("a heartbeat counts its writer", in)
	s := &messages.Suspicion{Writer: w.ID(), By: by.ID(), At: now - 1000, Seq: now - 2000}
	s.Sig = by.Sign(messages.SuspicionSigningBytes(network, s))
	r.run(func(c actor.Context) { r.a.onSuspicions(c, "", []*messages.Suspicion{s}, false) })
	r.waitSet("a suspicion counts its writer out", func(s []string) bool { return !in(s) })
	r.run(func(c actor.Context) {
		r.a.onHeartbeats(c, by.ID(), []*messages.Heartbeat{beat(now)}, false)
		if r.a.hb.taken != 2 {
			t.Error("refuting heartbeat refused")
		}
	})
	r.waitSet("a refuting heartbeat counts its writer again", in)
}

// dialedConn is what helloNeighbours reads of a connection.
type dialedConn struct {
	out bool
	id  string
}

func (f dialedConn) Outbound() bool { return f.out }
func (f dialedConn) PeerID() string { return f.id }

// A dial asks its peer to make room (hello neighbours 0, which a full
// view must take and evict for) only when the peer's heartbeats stopped
// reaching us, not when the peer is merely suspected (a live writer
// refutes a suspicion within a round trip). At 100 writers, dials that
// asked for room on suspicion fed a loop: evictions ended sessions,
// ended sessions raised suspicions, suspicions made dials that evicted,
// and the view churned (168 sessions opened a minute in a settled
// network, none without the loop).
func TestRoomAskedOnlyOfWritersNoLongerHeard(t *testing.T) {
	ids := newIdentities(t, 4)
	self, suspect, gone, by := ids[0], ids[1], ids[2], ids[3]
	const network = "net"
	r := newLivenessRig(t, self, network)
	now := uint64(time.Now().UnixMilli())
	r.run(func(c actor.Context) {
		a := r.a
		// One neighbour, so our own priority is 1.
		a.sessions[by.ID()] = &sessionEntry{up: true}
		a.hb.writers[by.ID()] = true
		for _, w := range []*identity.Identity{suspect, gone} {
			hb := &messages.Heartbeat{Writer: w.ID(), Seq: now - 2000}
			hb.Sig = w.Sign(messages.HeartbeatSigningBytes(network, w.ID(), hb.Seq))
			a.hb.writers[w.ID()] = true
			if !a.takeBeat(c, by.ID(), hb) {
				t.Errorf("heartbeat of %s refused", short(w.ID()))
			}
		}
		s := &messages.Suspicion{Writer: suspect.ID(), By: by.ID(), At: now - 1000, Seq: now - 2000}
		s.Sig = by.Sign(messages.SuspicionSigningBytes(network, s))
		a.onSuspicions(c, by.ID(), []*messages.Suspicion{s}, false)
		if !a.suspected(suspect.ID()) {
			t.Error("the suspicion was not taken")
		}
		delete(a.hb.heard, gone.ID()) // its heartbeats timed out
	})
	r.run(func(c actor.Context) {
		a := r.a
		if got := a.helloNeighbours(dialedConn{out: true, id: suspect.ID()}); got != 1 {
			t.Errorf("hello to a suspected writer still heard carries %d neighbours, want 1 (no eviction)", got)
		}
		if got := a.helloNeighbours(dialedConn{out: true, id: gone.ID()}); got != 0 {
			t.Errorf("hello to a writer no longer heard carries %d neighbours, want 0 (make room)", got)
		}
		cut := a.cutOff()
		if cut[suspect.ID()] || !cut[gone.ID()] {
			t.Errorf("dials past a full view go to %v; want %s only", shortAll(slices.Collect(maps.Keys(cut))), short(gone.ID()))
		}
	})
}

// One failure is suspected by each of the writer's neighbours: a node
// forwards the first suspicion of a writer and then only one that names
// a higher seq (which the refutation of the first would not clear), not
// every author's.
func TestSuspicionsOfOneFailureForwardedOnce(t *testing.T) {
	ids := newIdentities(t, 5)
	self, w, by1, by2, by3 := ids[0], ids[1], ids[2], ids[3], ids[4]
	const network = "net"
	r := newLivenessRig(t, self, network)
	sent := make(chan *messages.Suspicion, 64)
	neighbour := r.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *sendFrame:
			if m.env.Kind == messages.KindSuspicions {
				for _, s := range m.env.Overlay.Suspicions {
					sent <- s
				}
			}
		case string: // a barrier: one mailbox, so what was sent before is handled
			c.Respond(m)
		}
	}))
	now := uint64(time.Now().UnixMilli())
	suspicion := func(by *identity.Identity, at, seq uint64) *messages.Suspicion {
		s := &messages.Suspicion{Writer: w.ID(), By: by.ID(), At: at, Seq: seq}
		s.Sig = by.Sign(messages.SuspicionSigningBytes(network, s))
		return s
	}
	r.run(func(c actor.Context) {
		r.a.sessions["n"] = &sessionEntry{up: true, pid: neighbour}
		for _, id := range ids[1:] {
			r.a.hb.writers[id.ID()] = true
		}
		r.a.onSuspicions(c, by1.ID(), []*messages.Suspicion{suspicion(by1, now-300, now-5000)}, true)
		r.a.onSuspicions(c, by2.ID(), []*messages.Suspicion{suspicion(by2, now-200, now-5000)}, true)
		r.a.onSuspicions(c, by3.ID(), []*messages.Suspicion{suspicion(by3, now-100, now-4000)}, true)
	})
	var got []string
	deadline := time.After(5 * time.Second)
	for len(got) < 2 {
		select {
		case s := <-sent:
			got = append(got, short(s.By))
		case <-deadline:
			t.Fatalf("forwarded %v, want %s and %s", got, short(by1.ID()), short(by3.ID()))
		}
	}
	if _, err := r.sys.Root.RequestFuture(neighbour, "sync", 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-sent:
		got = append(got, short(s.By))
	default:
	}
	if want := []string{short(by1.ID()), short(by3.ID())}; !slices.Equal(got, want) {
		t.Fatalf("forwarded suspicions by %v, want %v (by %s adds nothing)", got, want, short(by2.ID()))
	}
}

// A bootstrap peer never heard isolatedAfter after we started may be
// dialed past a full view: a node that knows nobody (the network's
// first) is otherwise alone for good once every peer that meant to dial
// it filled its view first. Before isolatedAfter, and for a bootstrap
// peer we hear, no such dial.
func TestUnheardBootstrapPeerDialedPastFullView(t *testing.T) {
	self, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	lone, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	r := newLivenessRig(t, self, "net")
	r.run(func(c actor.Context) {
		a := r.a
		a.bootstrap = []dialTarget{{id: lone.ID(), addr: "127.0.0.1:1"}}
		a.startedAt = a.d.Now()
		if a.cutOff()[lone.ID()] {
			t.Error("a bootstrap peer is dialed past a full view right after start")
		}
		a.startedAt = a.d.Now().Add(-isolatedAfter)
		if !a.cutOff()[lone.ID()] {
			t.Errorf("a bootstrap peer never heard in %v is not dialed past a full view", isolatedAfter)
		}
		a.hb.latest[lone.ID()] = 1
		a.hb.heard[lone.ID()] = a.d.Now()
		if a.cutOff()[lone.ID()] {
			t.Error("a bootstrap peer we hear is dialed past a full view")
		}
	})
}

// A session's Terminated (a system message) is handled before the user
// messages already in the supervisor's mailbox, so the leave the session
// passed on just before it stopped may come after it. Such a session
// left; it did not fail, and its peer is not suspected. One that ended
// with no leave behind it is.
func TestLeaveAfterTerminatedIsNoFailure(t *testing.T) {
	r := newSessionsRig(t)
	var sessions []*actor.PID
	for range 2 {
		sessions = append(sessions, r.sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {})))
	}
	left, failed := strings.Repeat("1", 64), strings.Repeat("2", 64)
	r.run(func(c actor.Context) {
		r.a.sessions[left] = &sessionEntry{up: true, pid: sessions[0]}
		r.a.sessions[failed] = &sessionEntry{up: true, pid: sessions[1]}
		r.a.onTerminated(c, sessions[0])
		r.a.onLeft(c, &peerLeft{pid: sessions[0], id: left})
		r.a.onEnded(c, &sessionEnded{pid: sessions[0]})
	})
	if r.a.sus.sent != 0 || r.a.view.left != 1 {
		t.Fatalf("a leave after its session's Terminated: %d suspicions sent, %d leaves counted; want 0 and 1", r.a.sus.sent, r.a.view.left)
	}
	if !r.a.gate.isHeld(left) {
		t.Fatal("the peer that left is not held off from redialing")
	}
	r.run(func(c actor.Context) {
		r.a.onTerminated(c, sessions[1])
		r.a.onEnded(c, &sessionEnded{pid: sessions[1]})
	})
	if r.a.sus.sent != 1 || len(r.a.ended) != 0 {
		t.Fatalf("a session that ended without a leave: %d suspicions sent (want 1), %d ends pending", r.a.sus.sent, len(r.a.ended))
	}
}

// newTrimRig is a supervisor whose view trims: ActiveView 6 (cap 7), no
// endpoint (no addresses of ours in a leave's sample).
func newTrimRig(t *testing.T) *livenessRig {
	self, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	r := newLivenessRig(t, self, "net")
	r.a.known, r.a.reach = map[string]*knownPeer{}, newReachState(time.Now())
	r.a.adv, r.a.advAt = []string{}, time.Now()
	r.a.d.ActiveView = 6
	return r
}

// inboundConn is a connection the peer dialed (all trimView reads of it).
type inboundConn struct{ transport.Conn }

func (inboundConn) Outbound() bool { return false }

// At the cap, a dialer short of a full view is taken when one of our
// neighbours has a view to spare, and that neighbour gets the leave, not
// the dialer: otherwise a node a neighbour short whose non-neighbours
// all sit at the cap stays short. A dialer with a full view, or any
// dialer when no neighbour has a view to spare, is refused.
func TestShortDialerTakenAtTheCapForASpareNeighbour(t *testing.T) {
	r := newTrimRig(t)
	spare, dialer := strings.Repeat("5", 64), strings.Repeat("9", 64)
	long := time.Now().Add(-time.Minute)
	fill := func(withSpare bool) {
		clear(r.a.sessions)
		for i := range 7 {
			id, theirs := strings.Repeat(string(rune('a'+i)), 64), 6
			if i == 5 && withSpare {
				id, theirs = spare, 7
			}
			pid := r.sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
			r.a.sessions[id] = &sessionEntry{up: true, pid: pid, upAt: long, theirs: theirs}
		}
	}
	var noSpare, full, short bool
	r.run(func(c actor.Context) {
		fill(false)
		noSpare = r.a.admit(dialer, 5)
		fill(true)
		full = r.a.admit(dialer, 6)
		short = r.a.admit(dialer, 5)
		pid := r.sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
		r.a.sessions[dialer] = &sessionEntry{up: true, pid: pid, upAt: time.Now(), conn: inboundConn{}, hello: &messages.Hello{Neighbours: 5}}
		r.a.trimView(c, dialer)
	})
	if noSpare || full || !short {
		t.Fatalf("admitted at the cap: short dialer, no neighbour to spare %v (want false); full dialer %v (want false); short dialer, a neighbour to spare %v (want true)", noSpare, full, short)
	}
	_, spareKept := r.a.sessions[spare]
	_, dialerKept := r.a.sessions[dialer]
	if spareKept || !dialerKept || len(r.a.sessions) != 7 {
		t.Fatalf("after the trim: %d sessions, the spare neighbour kept %v (want false), the dialer kept %v (want true)", len(r.a.sessions), spareKept, dialerKept)
	}
}

// A view pushed past its cap by our own dial drops a neighbour whose
// last peer list named more than ActiveView peers (it stays full and
// dials nobody), not one that would be left short.
func TestTrimDropsANeighbourWithAViewToSpare(t *testing.T) {
	r := newTrimRig(t)
	spare := strings.Repeat("5", 64)
	long := time.Now().Add(-time.Minute)
	// A random pick would keep the spare neighbour 7 times in 8; twenty
	// trims in a row leave it no chance.
	for round := range 20 {
		r.run(func(c actor.Context) {
			clear(r.a.sessions)
			for i := range 8 {
				id := strings.Repeat(string(rune('a'+i)), 64)
				theirs := 6 // our leave would leave it one short
				if i == 5 {
					id, theirs = spare, 7
				}
				pid := r.sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
				r.a.sessions[id] = &sessionEntry{up: true, pid: pid, upAt: long, theirs: theirs}
			}
			r.a.trimView(c, "")
		})
		if _, kept := r.a.sessions[spare]; kept || len(r.a.sessions) != 7 {
			t.Fatalf("trim %d: %d sessions left, the one with a view to spare kept: %v", round, len(r.a.sessions), kept)
		}
	}
}

// A writer whose heartbeats stopped reaching us (HeartbeatTimeout), with
// no session to us and no suspicion we hold of it, is suspected by us
// once: the suspicion goes to our neighbours, so a writer beyond a long
// partition learns at the heal that it is not heard and refutes. A
// second tick signs nothing more while the suspicion stands, and a
// writer still heard is not suspected.
func TestWritersNoLongerHeardSuspectedOnce(t *testing.T) {
	ids := newIdentities(t, 4)
	self, gone, live, by := ids[0], ids[1], ids[2], ids[3]
	const network = "net"
	r := newLivenessRig(t, self, network)
	sent := r.neighbour(by, messages.KindSuspicions)
	r.run(func(c actor.Context) {
		a := r.a
		now := a.d.Now()
		for _, w := range []*identity.Identity{gone, live} {
			hb := &messages.Heartbeat{Writer: w.ID(), Seq: uint64(now.UnixMilli())}
			hb.Sig = w.Sign(messages.HeartbeatSigningBytes(network, w.ID(), hb.Seq))
			a.hb.writers[w.ID()] = true
			if !a.takeBeat(c, by.ID(), hb) {
				t.Fatalf("heartbeat of %s refused", short(w.ID()))
			}
		}
		a.hb.heard[gone.ID()] = now.Add(-a.hbTimeout()) // timed out
		a.heartbeatTick(c, now)
		if !a.suspected(gone.ID()) {
			t.Error("a writer no longer heard is not suspected")
		}
		if a.suspected(live.ID()) {
			t.Error("a writer still heard is suspected")
		}
		signed := a.sus.sent
		a.heartbeatTick(c, now.Add(time.Second))
		if a.sus.sent != signed {
			t.Errorf("a second tick signed %d more suspicions", a.sus.sent-signed)
		}
	})
	select {
	case o := <-sent:
		if s := o.Suspicions[0]; s.Writer != gone.ID() || s.By != self.ID() {
			t.Fatalf("sent a suspicion of %s by %s, want of %s by us", short(s.Writer), short(s.By), short(gone.ID()))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the suspicion of a writer no longer heard was not sent to our neighbour")
	}
}

// TestWritersNeverHeardSuspected: a writer of the membership none of
// whose heartbeats reached us, with no session, is suspected once we
// have been in the network a whole heartbeat timeout (a partition from
// before its first heartbeat, outlasting the timeout, would otherwise
// leave it counted out after the heal until its next heartbeat), and
// not before; writers heard once and neighbours are not.
func TestWritersNeverHeardSuspected(t *testing.T) {
	ids := newIdentities(t, 4)
	self, never, heard, by := ids[0], ids[1], ids[2], ids[3]
	const network = "net"
	r := newLivenessRig(t, self, network)
	r.writers = []string{self.ID(), never.ID(), heard.ID(), by.ID()}
	r.a.sus = suspicionState{} // a node that never held a suspicion
	sent := r.neighbour(by, messages.KindSuspicions)
	r.run(func(c actor.Context) {
		a := r.a
		now := a.d.Now()
		hb := &messages.Heartbeat{Writer: heard.ID(), Seq: uint64(now.UnixMilli())}
		hb.Sig = heard.Sign(messages.HeartbeatSigningBytes(network, heard.ID(), hb.Seq))
		a.hb.writers[heard.ID()] = true
		if !a.takeBeat(c, by.ID(), hb) {
			t.Fatal("heartbeat refused")
		}
		a.netSince = now.Add(-time.Second)
		a.heartbeatTick(c, now)
		if a.sus.askingWriters || a.sus.sent != 0 {
			t.Fatal("writers asked for (or suspected) before a timeout in the network")
		}
		a.netSince = now.Add(-a.hbTimeout())
		a.heartbeatTick(c, now)
		if !a.sus.askingWriters {
			t.Fatal("the membership was not asked for a timeout into the network")
		}
	})
	select {
	case o := <-sent:
		if s := o.Suspicions[0]; s.Writer != never.ID() || s.By != self.ID() || s.Seq != 0 {
			t.Fatalf("sent a suspicion of %s by %s at seq %d, want of %s by us at 0", short(s.Writer), short(s.By), s.Seq, short(never.ID()))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the writer never heard was not suspected")
	}
	r.run(func(c actor.Context) {
		a := r.a
		if a.suspected(heard.ID()) || a.suspected(by.ID()) {
			t.Error("a writer heard or a neighbour is suspected")
		}
		signed := a.sus.sent
		a.heartbeatTick(c, a.d.Now())
		if a.sus.sent != signed || a.sus.askingWriters {
			t.Error("a tick with nothing changed asked again")
		}
	})
}

// TestGreetedHeartbeatRefutesOnward: a heartbeat that comes in a new
// neighbour's greeting, of a writer we never heard (so the ledger is
// asked whether it is one) and hold suspected, goes on at once to our
// other neighbours. A bridge across a healed partition greets with its
// side's heartbeats; the writers of that side were suspected on ours
// since before their first heartbeat reached us, and taken by the
// bridge's end alone, one of them stayed counted out by the rest of our
// side until its next heartbeat, minutes later.
func TestGreetedHeartbeatRefutesOnward(t *testing.T) {
	ids := newIdentities(t, 4)
	self, w, greeter, other := ids[0], ids[1], ids[2], ids[3]
	const network = "net"
	r := newLivenessRig(t, self, network)
	r.writers = []string{self.ID(), w.ID(), greeter.ID(), other.ID()}
	beats := r.neighbour(other, messages.KindHeartbeats)
	r.neighbour(greeter, messages.KindHeartbeats)
	r.run(func(c actor.Context) {
		a := r.a
		now := a.d.Now()
		a.signSuspicion(w.ID(), now) // never heard: seq 0
		hb := &messages.Heartbeat{Writer: w.ID(), Seq: uint64(now.UnixMilli())}
		hb.Sig = w.Sign(messages.HeartbeatSigningBytes(network, w.ID(), hb.Seq))
		a.onHeartbeats(c, greeter.ID(), []*messages.Heartbeat{hb}, false)
	})
	select {
	case o := <-beats:
		if hb := o.Heartbeats[0]; hb.Writer != w.ID() {
			t.Fatalf("forwarded a heartbeat of %s, want %s's", short(hb.Writer), short(w.ID()))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the greeting's heartbeat that refutes a held suspicion did not go on to the other neighbour")
	}
	r.run(func(actor.Context) {
		if r.a.suspected(w.ID()) {
			t.Error("the writer is still suspected after its heartbeat was taken")
		}
	})
}

// TestSuspicionsOfAnUnknownAuthorAllTaken: an author we never heard, at
// a heal, sends a suspicion of each writer of our side it does not hear;
// they wait on the ledger's answer about the author, and every one of
// them is taken once it comes, not the first few: each may be the only
// suspicion that reaches its writer, which then counts out of the other
// side's quorums until it refutes one.
func TestSuspicionsOfAnUnknownAuthorAllTaken(t *testing.T) {
	const n = 40
	ids := newIdentities(t, n+2)
	self, by, suspects := ids[0], ids[1], ids[2:]
	const network = "net"
	r := newLivenessRig(t, self, network)
	for _, id := range ids {
		r.writers = append(r.writers, id.ID())
	}
	r.run(func(c actor.Context) {
		a := r.a
		at := uint64(a.d.Now().UnixMilli())
		var ss []*messages.Suspicion
		for _, w := range suspects {
			s := &messages.Suspicion{Writer: w.ID(), By: by.ID(), At: at}
			s.Sig = by.Sign(messages.SuspicionSigningBytes(network, s))
			ss = append(ss, s)
		}
		a.onSuspicions(c, "", ss, true)
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		var held int
		r.run(func(actor.Context) {
			for _, w := range suspects {
				if r.a.suspected(w.ID()) {
					held++
				}
			}
		})
		if held == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d suspicions by an author first asked about were taken", held, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.run(func(actor.Context) {
		if len(r.a.sus.asking) != 0 {
			t.Errorf("suspicions of %d authors still held after the answer", len(r.a.sus.asking))
		}
	})
}

// neighbour makes writer id a neighbour with an established session
// whose end hands on the overlay of every frame of kind sent to it (and
// drops the rest, or those past 64 not yet read).
func (r *livenessRig) neighbour(id *identity.Identity, kind string) <-chan *messages.Overlay {
	sent := make(chan *messages.Overlay, 64)
	pid := r.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*sendFrame); ok && m.env.Kind == kind {
			select {
			case sent <- m.env.Overlay:
			default:
			}
		}
	}))
	r.run(func(actor.Context) {
		r.a.sessions[id.ID()] = &sessionEntry{up: true, pid: pid}
		r.a.hb.writers[id.ID()] = true
	})
	return sent
}

// newIdentities makes n fresh identities.
func newIdentities(t *testing.T, n int) []*identity.Identity {
	t.Helper()
	ids := make([]*identity.Identity, n)
	for i := range ids {
		id, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}
