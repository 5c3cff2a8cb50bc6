package procs

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// steps feeds cores to g one tick at a time, on a machine with a core
// idle, and returns the P count after each.
func steps(g *Governor, cores ...float64) []int {
	out := make([]int, len(cores))
	for i, c := range cores {
		out[i], _ = g.Step(c, 1, false)
	}
	return out
}

func repeat(c float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = c
	}
	return out
}

func TestStepUpNeedsAWholeWindow(t *testing.T) {
	g := New(4)
	// A pipeline's bursts: single ticks above Up, the window's mean below.
	for i, p := range steps(g, 1.0, 0.7, 1.0, 0.8, 0.9, 1.0, 0.8, 0.9) {
		if p != 1 {
			t.Fatalf("tick %d: %d Ps for bursts that average under %.2f", i, p, g.Up)
		}
	}
	// After a quiet tick, five at a full core: up, to Max at once.
	steps(g, repeat(0, g.UpTicks)...)
	got := steps(g, 1.0, 1.0, 1.0, 1.0, 1.0)
	if got[3] != 1 || got[4] != 4 {
		t.Fatalf("P counts %v, want 1 until the fifth saturated tick, then 4", got)
	}
}

func TestStepDownAfterTheWait(t *testing.T) {
	g := New(2)
	steps(g, repeat(1, g.UpTicks)...)
	if g.Procs() != 2 {
		t.Fatalf("%d Ps after a saturated window", g.Procs())
	}
	// Still busy at Max (a tunnel spread over two Ps reads 0.9): stays.
	for i, p := range steps(g, repeat(0.9, 100)...) {
		if p != 2 {
			t.Fatalf("tick %d: went down at 0.9 cores", i)
		}
	}
	// Below Down for the whole wait after going up: one P, not a tick
	// earlier.
	g = New(2)
	steps(g, repeat(1, g.UpTicks)...)
	got := steps(g, repeat(0.5, g.DownTicks)...)
	if got[g.DownTicks-2] != 2 || got[g.DownTicks-1] != 1 {
		t.Fatalf("went to %v; want 2 until tick %d, then 1", got, g.DownTicks)
	}
}

func TestStepBounceDoublesTheWait(t *testing.T) {
	g := New(2)
	steps(g, repeat(1, g.UpTicks)...)
	steps(g, repeat(0, g.DownTicks)...)
	if g.Procs() != 1 {
		t.Fatal("did not go down")
	}
	// Back up at once: a bounce.
	steps(g, repeat(1, g.UpTicks)...)
	if g.Procs() != 2 || g.wait() != 2*g.DownTicks {
		t.Fatalf("after a bounce: %d Ps, wait %d; want 2 and %d", g.Procs(), g.wait(), 2*g.DownTicks)
	}
	got := steps(g, repeat(0, 2*g.DownTicks)...)
	if got[2*g.DownTicks-2] != 2 || got[2*g.DownTicks-1] != 1 {
		t.Fatal("the doubled wait was not kept")
	}
	// Bounces grow the wait up to MaxDownTicks and no further.
	for range 10 {
		steps(g, repeat(1, g.UpTicks)...)
		steps(g, repeat(0, g.wait())...)
	}
	if g.wait() != g.MaxDownTicks {
		t.Fatalf("wait %d after many bounces, want the cap %d", g.wait(), g.MaxDownTicks)
	}
	// Holding a P count for MaxDownTicks resets it.
	steps(g, repeat(0.5, g.MaxDownTicks)...)
	if g.wait() != g.DownTicks {
		t.Fatalf("wait %d after a long quiet spell, want %d", g.wait(), g.DownTicks)
	}
}

func TestStepUpNeedsASpareCore(t *testing.T) {
	g := New(2)
	// Saturated at one P on a machine with no core to spare (the node's
	// load shares its cores): stays.
	for i := range 50 {
		if p, _ := g.Step(1, 0.3, false); p != 1 {
			t.Fatalf("tick %d: up with 0.3 cores idle on the machine", i)
		}
	}
	// A core frees up: the window's mean of idle cores must reach Spare.
	got := make([]int, g.UpTicks)
	for i := range got {
		got[i], _ = g.Step(1, 1, false)
	}
	// Mean idle over the window after k ticks at 1 and 5-k at 0.3:
	// (k + 0.3(5-k))/5 >= 0.5 from k = 2.
	if got[0] != 1 || got[1] != 2 {
		t.Fatalf("P counts %v; want up once the window's idle mean reaches %.1f", got, g.Spare)
	}
	// Unknown idle time (+Inf) does not hold it back.
	g = New(2)
	for range g.UpTicks {
		g.Step(1, math.Inf(1), false)
	}
	if g.Procs() != 2 {
		t.Fatal("held at one P with the machine's idle time unknown")
	}
}

func TestMachineIdle(t *testing.T) {
	i0, ok := machineIdle()
	if !ok {
		t.Fatal("no idle time on this platform")
	}
	start := time.Now() // the idle time over a wall time long enough to read
	testutil.Eventually(t, 5*time.Second, func() error {
		if time.Since(start) < 200*time.Millisecond {
			return fmt.Errorf("waiting")
		}
		return nil
	})
	i1, _ := machineIdle()
	wall := time.Since(start)
	// /proc/stat counts in 10 ms ticks per CPU: one each way of slack.
	if i1 < i0 || i1-i0 > time.Duration(runtime.NumCPU())*(wall+20*time.Millisecond) {
		t.Fatalf("idle %v over %v of wall time on %d CPUs", i1-i0, wall, runtime.NumCPU())
	}
}

func TestStepOneCPUNeverChanges(t *testing.T) {
	g := New(1)
	for _, c := range repeat(2, 50) {
		if _, changed := g.Step(c, 1, true); changed {
			t.Fatal("changed with Max 1")
		}
	}
}

// TestRunFollowsRealLoad runs the governor on this test process with its
// real CPU time: a goroutine that spins takes it to Max, and stopping it
// brings it back to one P; when ctx ends Max is put back. The thresholds
// are lower than the node's so that a busy CI machine (other packages'
// tests on the same cores) still gives the spinner enough CPU to count;
// the rule's own numbers are checked above.
func TestRunFollowsRealLoad(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	g := New(3)
	g.Up, g.Down, g.UpTicks, g.DownTicks = 0.4, 0.2, 3, 5
	g.Spare = 0 // the machine's idle time is read, but CI's cores may have none
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var changes atomic.Int32
	go func() {
		defer close(done)
		Run(ctx, g, 20*time.Millisecond, processCPU, machineIdle, nil, func(from, to int, cores float64) {
			changes.Add(1)
			t.Logf("GOMAXPROCS %d -> %d at %.2f cores", from, to, cores)
		})
	}()
	testutil.Eventually(t, 5*time.Second, procsAre(1))

	var spin atomic.Bool
	spin.Store(true)
	go func() {
		x := 0
		for spin.Load() {
			x++
		}
		_ = x
	}()
	testutil.Eventually(t, 20*time.Second, procsAre(3))
	spin.Store(false)
	testutil.Eventually(t, 20*time.Second, procsAre(1))
	if changes.Load() < 2 {
		t.Fatalf("%d changes logged, want at least 2", changes.Load())
	}
	cancel()
	<-done
	if p := runtime.GOMAXPROCS(0); p != 3 {
		t.Fatalf("GOMAXPROCS %d after Run ended, want Max (3) back", p)
	}
}

// TestRunReadsMachineIdleOnlyNearSaturation: a process far below a
// core does not read the machine's idle time each tick; one near it
// does, at every tick.
func TestRunReadsMachineIdleOnlyNearSaturation(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	g := New(2)
	g.UpTicks = 1 << 20 // never goes up: the test counts reads only
	var busy atomic.Bool
	var used atomic.Int64 // fake CPU time, ns
	start := time.Now()
	cpu := func() time.Duration {
		if busy.Load() {
			return time.Since(start) // one core's worth
		}
		return time.Duration(used.Add(int64(time.Microsecond))) // nearly nothing
	}
	var reads atomic.Int32
	idle := func() (time.Duration, bool) { reads.Add(1); return time.Since(start), true }
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan struct{}, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, g, 5*time.Millisecond, cpu, idle, func() bool { ticks <- struct{}{}; return false }, nil)
	}()
	// Run puts GOMAXPROCS back as it returns: wait for it, or it may do
	// so in the middle of the next test.
	defer func() { cancel(); <-done }()
	for range 20 {
		<-ticks
	}
	if n := reads.Load(); n > 1 { // the one before the first tick
		t.Fatalf("%d reads of the machine's idle time in 20 quiet ticks, want none after the first", n)
	}
	start = time.Now().Add(-time.Hour) // cpu() now far ahead: saturated
	busy.Store(true)
	before := reads.Load()
	for range 20 {
		<-ticks
	}
	if n := reads.Load() - before; n < 18 {
		t.Fatalf("%d reads in 20 busy ticks, want one a tick", n)
	}
}

func TestStartKeepsTheOperatorsSetting(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	env := map[string]string{"GOMAXPROCS": "2"}
	if Start(context.Background(), func(k string) string { return env[k] }, nil, nil) != 0 {
		t.Fatal("governor started although GOMAXPROCS is set")
	}
	if runtime.GOMAXPROCS(0) != before {
		t.Fatal("GOMAXPROCS changed")
	}
}

func TestStepParallelWork(t *testing.T) {
	g := New(2)
	// DNS arriving for ParTicks ticks in a row: every core, CPU or not.
	for i := range g.ParTicks {
		p, _ := g.Step(0.1, 0, true)
		if want := 1; i < g.ParTicks-1 && p != want {
			t.Fatalf("tick %d: %d Ps before ParTicks of DNS", i, p)
		}
	}
	if g.Procs() != 2 {
		t.Fatalf("%d Ps after %d ticks of DNS, want 2", g.Procs(), g.ParTicks)
	}
	// Idle CPU but DNS still arriving: stays.
	for i := range 3 * g.DownTicks {
		if p, _ := g.Step(0.1, 0, i%5 != 0); p != 2 {
			t.Fatalf("tick %d: went down while DNS kept arriving", i)
		}
	}
	// DNS stops: down after the whole wait without it.
	got := make([]int, g.DownTicks)
	for i := range got {
		got[i], _ = g.Step(0.1, 0, false)
	}
	if got[g.DownTicks-2] != 2 || got[g.DownTicks-1] != 1 {
		t.Fatalf("P counts %v after DNS stopped; want 2 until tick %d, then 1", got, g.DownTicks)
	}
	// Bursts of DNS shorter than ParTicks do not take it up.
	for i := range 50 {
		if p, _ := g.Step(0.1, 0, i%g.ParTicks != 0); p != 1 {
			t.Fatalf("tick %d: up on DNS bursts shorter than ParTicks", i)
		}
	}
}

func TestGrew(t *testing.T) {
	var n int64 = 500
	grew := Grew(func() int64 { return n }, 100)
	for _, c := range []struct {
		add  int64
		want bool
	}{{0, false}, {99, false}, {100, true}, {250, true}, {1, false}} {
		n += c.add
		if got := grew(); got != c.want {
			t.Fatalf("after adding %d: %v, want %v", c.add, got, c.want)
		}
	}
}

// TestAnyOf: true when either count grew enough over the tick, and each
// count's Grew asked every tick, so a tick of one does not stretch the
// other's over two ticks.
func TestAnyOf(t *testing.T) {
	var dns, edge int64
	parallel := AnyOf(Grew(func() int64 { return dns }, 100), Grew(func() int64 { return edge }, 50))
	for i, c := range []struct {
		dns, edge int64
		want      bool
	}{{0, 0, false}, {100, 0, true}, {0, 50, true}, {100, 50, true}, {60, 30, false}, {40, 20, false}, {0, 0, false}} {
		dns += c.dns
		edge += c.edge
		if got := parallel(); got != c.want {
			t.Fatalf("tick %d (+%d DNS, +%d edge): %v, want %v", i, c.dns, c.edge, got, c.want)
		}
	}
}

func TestStartRunsUntilCtxEnds(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	ctx, cancel := context.WithCancel(context.Background())
	if Start(ctx, func(string) string { return "" }, nil, nil) != 2 {
		t.Fatal("governor did not start with GOMAXPROCS unset and 2 Ps")
	}
	testutil.Eventually(t, 5*time.Second, procsAre(1))
	cancel()
	testutil.Eventually(t, 5*time.Second, procsAre(2))
}

// procsAre is a condition for testutil.Eventually: GOMAXPROCS is want.
func procsAre(want int) func() error {
	return func() error {
		if p := runtime.GOMAXPROCS(0); p != want {
			return fmt.Errorf("GOMAXPROCS %d, want %d", p, want)
		}
		return nil
	}
}
