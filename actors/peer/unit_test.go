package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/applied"
	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

func TestParseTarget(t *testing.T) {
	id := strings.Repeat("ab", 32)
	tests := []struct {
		in, id, addr string
		ok           bool
	}{
		{"127.0.0.1:7740", "", "127.0.0.1:7740", true},
		{" node.example:7740 ", "", "node.example:7740", true},
		{id + "@10.0.0.2:7740", id, "10.0.0.2:7740", true},
		{"[::1]:7740", "", "[::1]:7740", true},
		{"nohost", "", "", false},
		{"127.0.0.1:0", "", "", false},
		{"127.0.0.1:70000", "", "", false},
		{"0.0.0.0:7740", "", "", false},
		{"zz@127.0.0.1:1", "", "", false},
		{id + "@", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseTarget(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("parseTarget(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if tt.ok && (got.id != tt.id || got.addr != tt.addr) {
				t.Fatalf("parseTarget(%q) = %+v, want %s@%s", tt.in, got, tt.id, tt.addr)
			}
		})
	}
}

func TestMergeAddrs(t *testing.T) {
	got, changed := mergeAddrs([]string{"127.0.0.1:1"}, []string{"127.0.0.1:1", "bad", "127.0.0.1:2", "0.0.0.0:3"}, 8)
	if !changed || strings.Join(got, ",") != "127.0.0.1:1,127.0.0.1:2" {
		t.Fatalf("mergeAddrs = %v, %v", got, changed)
	}
	if _, changed := mergeAddrs(got, []string{"127.0.0.1:2"}, 8); changed {
		t.Fatal("mergeAddrs reported a change for a known address")
	}
	capped, _ := mergeAddrs(nil, []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, 2)
	if len(capped) != 2 {
		t.Fatalf("mergeAddrs kept %d addresses over the cap", len(capped))
	}
}

func TestAdvertised(t *testing.T) {
	if got := advertised(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7740}); len(got) != 1 || got[0] != "127.0.0.1:7740" {
		t.Fatalf("advertised(127.0.0.1) = %v", got)
	}
	got := advertised(&net.UDPAddr{IP: net.IPv4zero, Port: 7740})
	if len(got) == 0 {
		t.Fatal("advertised(0.0.0.0) is empty")
	}
	for _, a := range got {
		if !validAddr(a) || !strings.HasSuffix(a, ":7740") {
			t.Fatalf("advertised(0.0.0.0) has %q", a)
		}
	}
}

func TestDialGate(t *testing.T) {
	now := time.Unix(1000, 0)
	g := newDialGate(8, func() time.Time { return now })
	if g.skip("") {
		t.Fatal("an unknown id is never skipped")
	}
	if g.skip("a") {
		t.Fatal("first dial of a skipped")
	}
	if !g.skip("a") {
		t.Fatal("second concurrent dial of a not skipped")
	}
	now = now.Add(dialStagger)
	if !g.skip("a") {
		t.Fatal("a dial beside one in flight let through, a not the inviter we join by")
	}
	// While we join through a, the first dial still waiting a
	// dialStagger later, another of the invite's addresses is dialed
	// beside it, and the next waits as long again.
	g.setJoining("a")
	if g.skip("a") {
		t.Fatal("an invite's address not dialed beside a dial that has waited dialStagger")
	}
	if !g.skip("a") {
		t.Fatal("a third dial of a right after the second not skipped")
	}
	g.done("a")
	if !g.skip("a") {
		t.Fatal("one of two dials of a ended: a new one began less than dialStagger after the second")
	}
	now = now.Add(dialStagger)
	g.setJoining("") // joined: one dial at a time again
	if !g.skip("a") {
		t.Fatal("a dial beside one in flight let through once joined")
	}
	g.done("a")
	if g.skip("a") {
		t.Fatal("no dial of a in flight, and a new one skipped")
	}
	g.done("a")
	g.set([]string{"a"})
	if !g.skip("a") {
		t.Fatal("connected peer not skipped")
	}
	g.set(nil)
	if g.skip("a") {
		t.Fatal("disconnected peer skipped")
	}
	g.done("a")
	// A hold keeps dialers off until it ends; a shorter one set while it
	// runs (a replaced connection's, beside a leave's) does not end it
	// sooner.
	g.hold("a", now.Add(leaveHold))
	g.hold("a", now.Add(time.Second))
	now = now.Add(2 * time.Second)
	if !g.skip("a") {
		t.Fatal("a shorter hold ended a longer one")
	}
	now = now.Add(leaveHold)
	if g.skip("a") {
		t.Fatal("a peer whose hold ended still skipped")
	}
}

// A dial in flight to a peer is cancelled once a connection to it is
// admitted (settle) or another of our dials to it got through (mark);
// dials to other peers go on.
func TestDialGateCancelsDialsInFlight(t *testing.T) {
	g := newDialGate(8, time.Now)
	a1, rel1 := g.attempt(context.Background(), "a")
	a2, rel2 := g.attempt(context.Background(), "a")
	b, relB := g.attempt(context.Background(), "b")
	defer relB()
	rel1() // this one returned (its dial got through)
	if a1.Err() == nil {
		t.Fatal("a released attempt's context is not done")
	}
	g.mark("a")
	if a2.Err() == nil {
		t.Fatal("the other dial to a was not cancelled when one got through")
	}
	rel2()
	if b.Err() != nil {
		t.Fatal("a dial to b was cancelled by a connection to a")
	}
	g.settle("b")
	if b.Err() == nil {
		t.Fatal("the dial to b was not cancelled when a connection to b was admitted")
	}
	if n := len(g.attempts); n != 0 {
		t.Fatalf("%d peers still tracked after every attempt ended", n)
	}
	if ctx, rel := g.attempt(context.Background(), ""); ctx.Err() != nil {
		t.Fatal("a dial to an unknown id is not tracked, and not cancelled")
	} else {
		rel()
	}
}

func TestPropsWithMissingDepsStops(t *testing.T) {
	testutil.NoLeaks(t)
	sys := quietSystem()
	defer sys.Shutdown()
	logs := &testutil.LogBuffer{}
	stopped := make(chan struct{})
	// A parent that watches the supervisor: it must stop itself, not
	// panic (a panic would restart it) and not wait for a request.
	parent := actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Spawn(Props(Deps{Log: slog.New(slog.NewTextHandler(logs, nil))}))
		case *actor.Terminated:
			if m.Who.Id != c.Self().Id {
				close(stopped)
			}
		}
	})
	if _, err := sys.Root.SpawnNamed(parent, "parent"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("a supervisor without deps kept running")
	}
	if !strings.Contains(logs.String(), "peer: Deps.Identity is nil") {
		t.Fatalf("the missing dependency was not logged:\n%s", logs.String())
	}
}

func TestJoinRefusal(t *testing.T) {
	tests := []struct {
		code string
		want error // nil: a later attempt may succeed
	}{
		{messages.RefuseInviteExpired, transport.ErrInviteExpired},
		{messages.RefuseInviteUsed, transport.ErrInviteUsed},
		{messages.RefuseInviteInvalid, transport.ErrInviteInvalid},
		{messages.RefuseForeignNetwork, transport.ErrInviteInvalid},
		{messages.RefuseInternal, nil},
		{messages.RefuseNoNetwork, nil},
		{messages.RefuseDuplicate, nil},
		{"something new", nil},
	}
	for _, tt := range tests {
		if got := joinRefusal(tt.code); got != tt.want {
			t.Errorf("joinRefusal(%q) = %v, want %v", tt.code, got, tt.want)
		}
	}
}

// failJoin reports once however many refusals arrive (one per address
// the invite lists, redials already under way).
func TestFailJoinReportsOnce(t *testing.T) {
	var got []error
	a := newActor(Deps{Log: slog.New(slog.NewTextHandler(&testutil.LogBuffer{}, nil)), Now: time.Now, Fatal: func(err error) { got = append(got, err) }})
	a.dialers = map[string]*dialerEntry{}
	cancelled := 0
	for _, addr := range []string{"127.0.0.1:1", "127.0.0.1:2"} {
		a.dialers[addr] = &dialerEntry{cancel: func() { cancelled++ }}
	}
	inviter := strings.Repeat("ab", 32)
	a.joinInv = &transport.Invite{Inviter: inviter, Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}}
	a.netKnown = true
	a.gate = newDialGate(8, time.Now)
	a.gate.setJoining(inviter)
	a.sys = quietSystem() // publishHint
	defer a.sys.Shutdown()
	a.onInviteRefused(&inviteRefused{peer: inviter, code: messages.RefuseInternal, reason: "ledger busy"})
	if len(got) != 0 || a.joinInv == nil {
		t.Fatalf("a transient refusal failed the join: %v", got)
	}
	a.onInviteRefused(&inviteRefused{peer: strings.Repeat("cd", 32), code: messages.RefuseInviteUsed})
	if len(got) != 0 {
		t.Fatalf("a refusal by another peer failed the join: %v", got)
	}
	a.onInviteRefused(&inviteRefused{peer: inviter, code: messages.RefuseInviteUsed, reason: "invite already used (by 0123…)"})
	a.onInviteRefused(&inviteRefused{peer: inviter, code: messages.RefuseInviteExpired, reason: "invite expired at 2026-01-01T00:00:00Z"})
	a.failJoin(errors.New("join: something else"))
	if len(got) != 1 {
		t.Fatalf("Fatal called %d times: %v", len(got), got)
	}
	want := "join: invite already used (by 0123…) (refused by the inviter " + short(inviter) + ")"
	if got[0].Error() != want || !errors.Is(got[0], transport.ErrInviteUsed) {
		t.Fatalf("Fatal(%q), want %q wrapping ErrInviteUsed", got[0], want)
	}
	if cancelled != 2 || len(a.dialers) != 0 || a.joinInv != nil || a.netKnown || a.gate.inviter != "" {
		t.Fatalf("after failing: %d dialers cancelled, %d left, joining %v, ready %v, the gate's inviter %q", cancelled, len(a.dialers), a.joinInv != nil, a.netKnown, a.gate.inviter)
	}
}

// An address a dial found to be ours (transport.ErrSelf) is never dialed
// again, as the addresses we advertise are not; other addresses are not
// taken for ours.
func TestSelfAddressesAreNotDialed(t *testing.T) {
	id, _ := identity.Generate()
	ep := transport.NewMemNetwork().Listen(id, nil)
	defer ep.Close()
	a := newActor(Deps{Log: slog.New(slog.NewTextHandler(&testutil.LogBuffer{}, nil)), Now: time.Now, Endpoint: ep, Identity: id})
	a.dialers = map[string]*dialerEntry{}
	a.selfAddrs = map[string]bool{}
	own := a.advertise()
	if len(own) == 0 || !a.isOwn(own[0]) {
		t.Fatalf("an advertised address %v is not taken for ours", own)
	}
	if a.isOwn("192.0.2.7:7740") {
		t.Fatal("a stranger's address is taken for ours")
	}
	a.reachedSelf("192.0.2.7:7740")
	if !a.isOwn("192.0.2.7:7740") {
		t.Fatal("an address that reached us is not remembered as ours")
	}
	for _, addr := range []string{own[0], "192.0.2.7:7740"} {
		a.startDialer(addr, strings.Repeat("ab", 32), dialOpts{})
		if len(a.dialers) != 0 {
			t.Fatalf("a dialer started for our own address %s", addr)
		}
	}
	for i := range 2 * maxSelfAddrs {
		a.reachedSelf(fmt.Sprintf("192.0.2.8:%d", i+1))
	}
	if len(a.selfAddrs) > maxSelfAddrs {
		t.Fatalf("%d self addresses remembered, bound %d", len(a.selfAddrs), maxSelfAddrs)
	}
}

// A peer whose frames sit unread because our reader waits for our ledger
// (ops credits) is heard: while the reader waits, and for a full
// StaleAfter after the wait ends, counted from then.
func TestHeardAtCountsTheReaderWaitingOnUs(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	s := &session{}
	s.stats.lastSeen = t0
	if got := s.heardAt(t0.Add(5 * time.Second)); !got.Equal(t0) {
		t.Fatalf("not waiting: heard at %v, want the last frame %v", got, t0)
	}
	s.stall.waiting.Store(true)
	now := t0.Add(5 * time.Second)
	if got := s.heardAt(now); !got.Equal(now) {
		t.Fatalf("waiting: heard at %v, want now %v", got, now)
	}
	end := t0.Add(6 * time.Second)
	s.stall.until.Store(end.UnixNano())
	s.stall.waiting.Store(false)
	if got := s.heardAt(t0.Add(7 * time.Second)); !got.Equal(end) {
		t.Fatalf("after the wait: heard at %v, want its end %v", got, end)
	}
	s.stats.lastSeen = t0.Add(8 * time.Second)
	if got := s.heardAt(t0.Add(9 * time.Second)); !got.Equal(s.stats.lastSeen) {
		t.Fatalf("a frame after the wait: heard at %v, want %v", got, s.stats.lastSeen)
	}
}

// A neighbour counts out after StaleAfter while we know at most R
// writers, and after StaleAfterSparse beyond.
func TestStaleAfterBeyondR(t *testing.T) {
	d := Deps{Replicas: 3}
	d.defaults()
	a := &Actor{d: d}
	a.hb.latest = map[string]uint64{}
	for i := 0; i < 2; i++ {
		a.hb.latest[fmt.Sprint("w", i)] = 1
	}
	if got := a.staleAfter(); got != 2500*time.Millisecond {
		t.Fatalf("3 writers, R 3: stale after %v, want 2.5s", got)
	}
	a.hb.latest["w2"] = 1
	if got := a.staleAfter(); got != 3500*time.Millisecond {
		t.Fatalf("4 writers, R 3: stale after %v, want 3.5s", got)
	}
}

// A repair leaves out the ops that reached this node within the
// freshness window (twice the ledger's lag, at most a sync interval),
// and the later ops of their writers (sent alone they would make a
// gap); older ops, ops never checked here and an exempt writer's ops go
// out. With a ledger that keeps up nothing is held back.
func TestRepairLeavesFreshOpsOut(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var checked applied.Checked
	var lag ledgerLag
	s := &session{cfg: sessionConfig{checked: &checked, lag: &lag, syncInterval: 3 * time.Second, now: func() time.Time { return now }}}
	op := func(w string, seq uint64) *messages.Op { return &messages.Op{Writer: w, Seq: seq} }
	checked.Add("old", 1, [32]byte{}, now.Add(-4*time.Second))
	checked.Add("fresh", 2, [32]byte{}, now.Add(-time.Second))
	checked.Add("asked", 1, [32]byte{}, now.Add(-time.Second))
	in := []*messages.Op{op("fresh", 1), op("fresh", 2), op("fresh", 3), op("old", 1), op("old", 2), op("never", 7), op("asked", 1)}
	names := func(ops []*messages.Op) string {
		var got []string
		for _, o := range ops {
			got = append(got, fmt.Sprintf("%s/%d", o.Writer, o.Seq))
		}
		return strings.Join(got, " ")
	}
	if got := names(s.notFresh(in, nil)); got != names(in) {
		t.Fatalf("with no lag measured the repair sends %s, want everything", got)
	}
	for range 200 {
		lag.observe(10 * time.Second) // smoothed towards 10 s: the window stops at the sync interval
	}
	if got, want := names(s.notFresh(in, nil)), "fresh/1 old/1 old/2 never/7"; got != want {
		t.Fatalf("repair sends %s, want %s", got, want)
	}
	if got, want := names(s.notFresh(in, map[string]bool{"asked": true})), "fresh/1 old/1 old/2 never/7 asked/1"; got != want {
		t.Fatalf("repair with a grafted writer sends %s, want %s", got, want)
	}
	if out := s.notFresh(in[3:6], nil); len(out) != 3 || &out[0] != &in[3] {
		t.Error("a repair with nothing fresh is not the ops as given")
	}
	for range 200 {
		lag.observe(100 * time.Millisecond) // a window of 200 ms: the op of a second ago is no longer fresh
	}
	if got := names(s.notFresh(in, nil)); got != names(in) {
		t.Fatalf("with a 100 ms lag the repair sends %s, want everything", got)
	}
}

// The vector a node tells counts, after what its ledger applied, the
// contiguous ops its sessions verified lately (on their way to the
// ledger): not past a gap, not entries older than the bound, not
// forgotten ones; the ledger's vector itself is left as it was.
func TestHeldVectorCountsOpsOnTheirWay(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var checked applied.Checked
	for _, e := range []struct {
		w   string
		seq uint64
		at  time.Time
	}{
		{"a", 3, now}, {"a", 4, now}, {"a", 6, now}, // 5 missing: a gap
		{"b", 2, now.Add(-time.Minute)}, // too old to count
		{"c", 1, now}, {"c", 2, now},
	} {
		checked.Add(e.w, e.seq, [32]byte{}, e.at)
	}
	checked.Forget("c", 2)
	vv := messages.VersionVector{"a": 2, "b": 1, "c": 0}
	got := raiseHeld(vv, &checked, now.Add(-10*time.Second))
	want := messages.VersionVector{"a": 4, "b": 1, "c": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("held vector %v, want %v", got, want)
	}
	if vv["a"] != 2 || vv["c"] != 0 {
		t.Fatalf("the ledger's vector was changed: %v", vv)
	}
}

// The summary's counters only grow: a session that ended still counts.
func TestCountersKeepEndedSessions(t *testing.T) {
	a := &Actor{sessions: map[string]*sessionEntry{}}
	gone := &sessionEntry{up: true}
	gone.stats.opsSent, gone.stats.opsRepaired, gone.stats.grafts = 5, 2, 1
	live := &sessionEntry{up: true}
	live.stats.opsSent, live.stats.opsReceived, live.stats.wants = 3, 7, 1
	a.sessions["live"] = live
	a.view.retire(gone)
	c := a.counts()
	if c.opsSent != 8 || c.opsRepaired != 2 || c.grafts != 1 || c.opsReceived != 7 || c.wants != 1 {
		t.Fatalf("counts %+v, want the ended session's and the live one's summed", c)
	}
	if a.view.ends != 1 {
		t.Fatalf("ends %d, want 1", a.view.ends)
	}
}

// Dialers of learned peers stay within learnedDialerCap however many
// peers the address book holds; a view with room gets new ones from it
// (refillDialers), a full one none; a dropped dialer, or one of a peer
// held off after a refusal or a leave, frees its place.
func TestLearnedDialersBoundedAndRefilled(t *testing.T) {
	id, _ := identity.Generate()
	ep := transport.NewMemNetwork().Listen(id, nil)
	defer ep.Close()
	const view = 4
	a := newActor(Deps{Log: slog.New(slog.NewTextHandler(&testutil.LogBuffer{}, nil)), Now: time.Now, Endpoint: ep, Identity: id,
		ActiveView: view, Backoff: transport.Backoff{Min: time.Hour, Max: time.Hour}, Mesh: NewMesh()})
	a.self = id.ID()
	a.sys = actor.NewActorSystem()
	defer a.sys.Shutdown()
	a.pid = a.sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	a.ctx, a.cancel = context.WithCancel(context.Background())
	defer a.cancel()
	a.gate = newDialGate(view, time.Now)
	a.dialers, a.selfAddrs, a.sessions = map[string]*dialerEntry{}, map[string]bool{}, map[string]*sessionEntry{}
	a.known = map[string]*knownPeer{}
	for i := range 40 {
		a.known[fmt.Sprintf("%064x", i+1)] = &knownPeer{Addrs: []string{fmt.Sprintf("192.0.2.%d:7740", i+1)}, LastSeen: 1}
	}
	a.refillDialers(nil)
	if a.learnedDialers != view || len(a.dialers) != view {
		t.Fatalf("an empty view of %d started %d dialers (%d counted)", view, len(a.dialers), a.learnedDialers)
	}
	for range 5 {
		a.refillDialers(nil)
	}
	if a.learnedDialers != a.learnedDialerCap() || len(a.dialers) != a.learnedDialerCap() {
		t.Fatalf("%d dialers (%d counted) for 40 known peers, bound %d", len(a.dialers), a.learnedDialers, a.learnedDialerCap())
	}
	var gone string
	for addr := range a.dialers {
		gone = addr
		break
	}
	a.dropDialer(gone)
	if a.learnedDialers != a.learnedDialerCap()-1 || a.dialers[gone] != nil {
		t.Fatalf("after a drop: %d dialers counted, %s still listed: %v", a.learnedDialers, gone, a.dialers[gone] != nil)
	}
	var held string // a peer that refused us or left: its dialer goes at once
	for peer, k := range a.known {
		if a.dialers[k.Addrs[0]] != nil {
			held = peer
			break
		}
	}
	a.retireDialersOf(held)
	if a.learnedDialers != a.learnedDialerCap()-2 || a.dialers[a.known[held].Addrs[0]] != nil {
		t.Fatalf("the dialer of a held-off peer kept its place: %d counted", a.learnedDialers)
	}
	for peer := range a.known {
		if len(a.sessions) == view {
			break
		}
		a.sessions[peer] = &sessionEntry{up: true}
	}
	a.refillDialers(nil)
	if a.learnedDialers != a.learnedDialerCap()-2 {
		t.Fatalf("a full view started dialers: %d counted", a.learnedDialers)
	}
}

// A graft's sync sends the grafted writers' ops alone; one that waits
// behind a running sync keeps that only while everything merged into it
// is a graft too: a vector or a want merged in sends every writer's.
func TestGraftSyncMergedKeepsOnlyWhilePure(t *testing.T) {
	vv := messages.VersionVector{}
	s := &session{syncing: true}
	s.startSync(nil, vv, syncGraft, map[string]bool{"a": true})
	s.startSync(nil, vv, syncGraft, map[string]bool{"b": true})
	if !s.pendingOnly || s.pendingKind != syncGraft || !s.pendingExempt["a"] || !s.pendingExempt["b"] {
		t.Fatalf("two grafts: only %v, kind %v, exempt %v", s.pendingOnly, s.pendingKind, s.pendingExempt)
	}
	s.startSync(nil, vv, syncVV, nil)
	if s.pendingOnly || s.pendingKind != syncGraft {
		t.Fatalf("a graft and a vector: only %v, kind %v", s.pendingOnly, s.pendingKind)
	}
	s = &session{syncing: true}
	s.startSync(nil, vv, syncWant, nil)
	s.startSync(nil, vv, syncGraft, map[string]bool{"a": true})
	if s.pendingOnly {
		t.Fatal("a want, then a graft: only the grafted writers")
	}
}

// A ping (every tick at the default intervals), a digest (every third
// tick) and a heartbeat every 30 s go out on the ticks they are due,
// though the ticks come a tick interval apart only give or take a few
// milliseconds of the ticker's wake-up.
func TestTickedWorkDueDespiteJitter(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	start := time.Unix(1000, 0)
	var lastPing, lastVV, lastBeat time.Time
	pings, digests, beats := 0, 0, 0
	const ticks = 300
	for k := 1; k <= ticks; k++ {
		now := start.Add(time.Duration(k)*time.Second + time.Duration(rng.Int63n(int64(5*time.Millisecond))))
		if due(now, lastPing, time.Second, time.Second) {
			lastPing = now
			pings++
		}
		if due(now, lastVV, 3*time.Second, time.Second) {
			lastVV = now
			digests++
		}
		if due(now, lastBeat, 30*time.Second, time.Second) {
			lastBeat = now
			beats++
		}
	}
	if pings != ticks {
		t.Errorf("%d pings in %d ticks, want one each tick", pings, ticks)
	}
	if digests != ticks/3 {
		t.Errorf("%d digests in %d ticks, want one every third (%d)", digests, ticks, ticks/3)
	}
	if beats != ticks/30 {
		t.Errorf("%d heartbeats in %d ticks, want one every 30th (%d)", beats, ticks, ticks/30)
	}
}
