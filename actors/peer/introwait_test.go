package peer

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/transport"
	"peerdns/transport/identity"
)

// introLab is a supervisor's reach state with one introducer (n1, up)
// and one peer x that n1 listed and we cannot reach, on a clock the
// test moves.
type introLab struct {
	a   *Actor
	now time.Time
}

func newIntroLab(t *testing.T) *introLab {
	t.Helper()
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	ep := transport.NewMemNetwork().Listen(id, nil)
	t.Cleanup(func() { ep.Close() })
	l := &introLab{now: time.Unix(1000, 0)}
	d := Deps{ActiveView: 3, Mesh: NewMesh(), Endpoint: ep, Now: func() time.Time { return l.now }}
	d.defaults()
	l.a = &Actor{
		d:        d,
		sessions: map[string]*sessionEntry{"n1": {up: true, pid: actor.NewPID("local", "n1")}},
		known:    map[string]*knownPeer{"n1": {}, "x": {Addrs: []string{"192.0.2.7:7740"}}},
		reach:    newReachState(l.now),
		gate:     newDialGate(2, d.Now),
	}
	l.a.reach.via["x"] = "n1"
	l.a.reach.intros["x"] = &introState{learned: l.now, next: l.now, gap: introDelay}
	return l
}

// run ticks the supervisor's reach for d, a second at a time, and
// returns when it asked n1 to introduce x.
func (l *introLab) run(d time.Duration) []time.Time {
	var asked []time.Time
	for end := l.now.Add(d); l.now.Before(end); l.now = l.now.Add(time.Second) {
		if l.a.introDueNow("x", l.now) != nil {
			asked = append(asked, l.now)
		}
		l.a.pruneFruitless(l.now)
	}
	return asked
}

// TestFruitlessIntroductionsWaitLonger: a peer that no introduction
// brings to a direct session is asked about at the usual pace
// (doubling to introMaxGap) for introPatience, then at gaps doubling
// from introMaxGap to introLongGap; a change in the peer's addresses, or
// a direct session with it, starts again.
func TestFruitlessIntroductionsWaitLonger(t *testing.T) {
	l := newIntroLab(t)
	start := l.now
	asked := l.run(time.Hour)
	// The usual pace alone asks about 120 times an hour.
	if len(asked) < 12 || len(asked) > 30 {
		t.Fatalf("%d introductions asked in an hour: %v", len(asked), asked)
	}
	var gaps []time.Duration
	for i := 1; i < len(asked); i++ {
		g := asked[i].Sub(asked[i-1])
		gaps = append(gaps, g)
		if asked[i-1].Sub(start) < introPatience && g > introMaxGap+time.Second {
			t.Errorf("gap %d (within the patience) %v, want at most %v", i, g, introMaxGap)
		}
		if asked[i-1].Sub(start) >= introPatience && (g <= introMaxGap || g > introLongGap+time.Second) {
			t.Errorf("gap %d (past the patience) %v, want over %v, at most %v", i, g, introMaxGap, introLongGap)
		}
	}
	if last := gaps[len(gaps)-1]; last < introLongGap {
		t.Errorf("after an hour the gap is %v, want %v", last, introLongGap)
	}
	if asked[0] != start {
		t.Errorf("first introduction at %v, want at once", asked[0].Sub(start))
	}

	// The peer moved: the next tick asks.
	l.a.known["x"].Addrs = []string{"198.51.100.9:7740"}
	if got := l.run(2 * time.Second); len(got) != 1 {
		t.Fatalf("after the peer's addresses changed: %d introductions in 2 s, want 1", len(got))
	}

	// Back at the long gaps, then a direct session with x clears the
	// count: once it ends, introductions go at the usual pace.
	l.run(time.Hour)
	l.a.sessions["x"] = &sessionEntry{up: true}
	l.a.reachUp("x", nil, directConn{})
	delete(l.a.sessions, "x")
	l.a.reach.via["x"] = "n1" // n1's next exchange lists x again
	l.a.reach.intros["x"] = &introState{learned: l.now, next: l.now, gap: introDelay}
	if got := l.run(2 * time.Minute); len(got) < 8 {
		t.Fatalf("after a direct session: %d introductions in 2 min, want the usual pace", len(got))
	}
}

// directConn is a Conn that reads as a direct QUIC path.
type directConn struct{ transport.Conn }

func (directConn) Path() string { return transport.PathQUIC }
func (directConn) Via() string  { return "" }
