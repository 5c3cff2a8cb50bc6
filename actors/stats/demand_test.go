package stats

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/testutil"
	"peerdns/internal/view"
)

func TestDemandWanted(t *testing.T) {
	var d Demand
	now := time.Now()
	if d.Wanted(now) {
		t.Fatal("wanted before any reader")
	}
	d.Asked(now)
	if !d.Wanted(now.Add(Warm-time.Second)) || d.Wanted(now.Add(Warm)) {
		t.Fatal("a read should keep samples wanted for Warm, and no longer")
	}
	d.Watching(2)
	if !d.Wanted(now.Add(time.Hour)) {
		t.Fatal("not wanted with subscribers")
	}
	d.Watching(0)
	if d.Wanted(now.Add(time.Hour)) {
		t.Fatal("wanted after the subscribers left")
	}
}

// A sampler nobody reads builds nothing after its first sample, though
// it checks health every tick; a read brings the samples back every
// tick, and SampleNow answers with a fresh one at once.
func TestSamplerSamplesOnlyWhenWanted(t *testing.T) {
	sys := actor.NewActorSystem()
	pub := &view.Publisher[Snapshot]{}
	want := &Demand{}
	var builds, checks atomic.Int64
	pid := sys.Root.Spawn(Props(Deps{
		Interval: 10 * time.Millisecond, FreshFor: time.Nanosecond, Published: pub, Demand: want, Started: time.Now(),
		Admin:  func() Counters { builds.Add(1); return Counters{} },
		Health: func() map[string]any { checks.Add(1); return map[string]any{"status": "healthy"} },
	}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	atLeast := func(c *atomic.Int64, n int64, what string) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, func() error {
			if c.Load() < n {
				return fmt.Errorf("%d %s, want %d", c.Load(), what, n)
			}
			return nil
		})
	}
	atLeast(&checks, 20, "health checks")
	if n := builds.Load(); n != 1 {
		t.Fatalf("%d samples built over 20 ticks with nobody reading, want the first only", n)
	}
	first := pub.Load()
	res, err := sys.Root.RequestFuture(pid, SampleNow{}, 5*time.Second).Result()
	fresh, _ := res.(*Snapshot)
	if err != nil || fresh == nil || fresh == first || pub.Load() != fresh {
		t.Fatalf("SampleNow: %v, %v; want a fresh published sample", res, err)
	}
	want.Asked(time.Now())
	atLeast(&builds, 5, "samples built after a read")
}

// SampleNow while the last sample is fresh (readers that found it stale
// together) answers with that sample instead of building another.
func TestSampleNowServesAFreshSample(t *testing.T) {
	sys := actor.NewActorSystem()
	pub := &view.Publisher[Snapshot]{}
	var builds atomic.Int64
	pid := sys.Root.Spawn(Props(Deps{
		Interval: time.Hour, FreshFor: time.Hour, Published: pub, Demand: &Demand{}, Started: time.Now(),
		Admin: func() Counters { builds.Add(1); return Counters{} },
	}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	for range 3 {
		res, err := sys.Root.RequestFuture(pid, SampleNow{}, 5*time.Second).Result()
		if got, _ := res.(*Snapshot); err != nil || got == nil || got != pub.Load() {
			t.Fatalf("SampleNow: %v, %v; want the published sample", res, err)
		}
	}
	if n := builds.Load(); n != 1 {
		t.Fatalf("%d samples built, want the first only", n)
	}
}
