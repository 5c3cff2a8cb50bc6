package view

import (
	"fmt"
	"net/netip"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

type val struct{ n int }

// recorder is a subscriber that keeps every value it was called with.
type recorder struct {
	mu  sync.Mutex
	got []int
}

func (r *recorder) f(v *val) {
	r.mu.Lock()
	r.got = append(r.got, v.n)
	r.mu.Unlock()
}

func (r *recorder) values() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.got...)
}

// last waits until the latest value r saw is want.
func (r *recorder) waitLast(t *testing.T, want int) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, func() error {
		got := r.values()
		if len(got) == 0 || got[len(got)-1] != want {
			return fmt.Errorf("values %v, want last %d", got, want)
		}
		return nil
	})
}

func TestSubscribeGetsCurrentThenNewer(t *testing.T) {
	testutil.NoLeaks(t)
	var p Publisher[val]
	if p.Load() != nil {
		t.Fatal("Load before Store is not nil")
	}
	var early recorder
	cancelEarly := p.Subscribe(early.f) // nothing published yet: no call
	defer cancelEarly()
	v1 := &val{1}
	p.Store(v1)
	if p.Load() != v1 {
		t.Fatal("Load does not return the stored value at once")
	}
	var r recorder
	cancel := p.Subscribe(r.f)
	defer cancel()
	r.waitLast(t, 1)
	early.waitLast(t, 1)

	// The same pointer again is not delivered again.
	p.Store(v1)
	p.Store(&val{2})
	r.waitLast(t, 2)
	early.waitLast(t, 2)
	if got := r.values(); !reflect.DeepEqual(got, []int{1, 2}) {
		t.Fatalf("values %v, want [1 2]", got)
	}
	if got := early.values(); !reflect.DeepEqual(got, []int{1, 2}) {
		t.Fatalf("early subscriber values %v, want [1 2]", got)
	}
}

// A subscriber that is busy does not hold up Store, and when it is free
// again it gets the latest value only: the ones in between are skipped.
func TestCoalescesAndNeverBlocksStore(t *testing.T) {
	testutil.NoLeaks(t)
	var p Publisher[val]
	p.Store(&val{1})
	entered := make(chan int, 1)
	release := make(chan struct{})
	var r recorder
	cancel := p.Subscribe(func(v *val) {
		r.f(v)
		if v.n == 1 {
			entered <- v.n
			<-release
		}
	})
	defer cancel()
	<-entered // the subscriber is busy with value 1

	stored := make(chan struct{})
	go func() {
		for i := 2; i <= 1000; i++ {
			p.Store(&val{i})
		}
		close(stored)
	}()
	select {
	case <-stored:
	case <-time.After(10 * time.Second): // hang guard only; Store returns at once
		t.Fatal("Store blocked on a busy subscriber")
	}
	close(release)
	r.waitLast(t, 1000)
	if got := r.values(); !reflect.DeepEqual(got, []int{1, 1000}) {
		t.Fatalf("values %v, want [1 1000] (coalesced)", got)
	}
}

// Many subscribers, one writer, subscriptions coming and going: every
// subscriber sees strictly growing values and ends on the last one.
func TestOrderingUnderLoad(t *testing.T) {
	testutil.NoLeaks(t)
	var p Publisher[val]
	const n = 2000
	type sub struct {
		last   atomic.Int64
		bad    atomic.Int64 // a value not above the previous one
		cancel func()
	}
	subs := make([]*sub, 8)
	for i := range subs {
		s := &sub{}
		s.cancel = p.Subscribe(func(v *val) {
			if int64(v.n) <= s.last.Load() {
				s.bad.Add(1)
			}
			s.last.Store(int64(v.n))
		})
		subs[i] = s
	}
	var churn sync.WaitGroup
	stop := make(chan struct{})
	churn.Add(1)
	go func() { // subscribe and unsubscribe while values are stored
		defer churn.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			cancel := p.Subscribe(func(*val) {})
			cancel()
		}
	}()
	for i := 1; i <= n; i++ {
		p.Store(&val{i})
	}
	close(stop)
	churn.Wait()
	testutil.Eventually(t, 5*time.Second, func() error {
		for i, s := range subs {
			if s.last.Load() != n {
				return fmt.Errorf("subscriber %d at %d, want %d", i, s.last.Load(), n)
			}
		}
		return nil
	})
	for i, s := range subs {
		if s.bad.Load() != 0 {
			t.Errorf("subscriber %d saw %d values out of order", i, s.bad.Load())
		}
		s.cancel()
	}
}

// Once cancel returns, the subscriber's call in flight has finished, no
// call follows, and its goroutine is gone (NoLeaks).
func TestUnsubscribe(t *testing.T) {
	testutil.NoLeaks(t)
	var p Publisher[val]
	p.Store(&val{1})
	entered := make(chan struct{})
	release := make(chan struct{})
	var running, calls atomic.Int64
	cancel := p.Subscribe(func(v *val) {
		running.Add(1)
		defer running.Add(-1)
		calls.Add(1)
		if v.n == 1 {
			close(entered)
			<-release
		}
	})
	<-entered
	p.Store(&val{2}) // pending while cancel comes
	cancelled := make(chan int64)
	go func() {
		cancel()
		cancelled <- running.Load()
	}()
	close(release)
	if r := <-cancelled; r != 0 {
		t.Fatal("cancel returned while the subscriber was still running")
	}
	cancel() // twice is fine
	after := calls.Load()

	// Later values reach other subscribers, not the cancelled one.
	p.Store(&val{3})
	var other recorder
	cancelOther := p.Subscribe(other.f)
	other.waitLast(t, 3)
	cancelOther()
	if c := calls.Load(); c != after {
		t.Fatalf("cancelled subscriber called %d more times", c-after)
	}
	if subs := p.subs.Load(); subs == nil || len(*subs) != 0 {
		t.Fatalf("subscribers left: %v", subs)
	}
}

func TestLookup(t *testing.T) {
	d := &Domain{Name: "site.p2p", Status: "resolved", IP: netip.MustParseAddr("10.77.0.5")}
	s := &Snapshot{Domains: map[string]*Domain{"site.p2p": d}}
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"site.p2p", true},
		{"www.site.p2p", true},
		{"a.b.site.p2p", true},
		{"p2p", false},
		{"othersite.p2p", false},
		{"", false},
	} {
		got, ok := s.Lookup(tt.name)
		if ok != tt.ok || (ok && got != d) {
			t.Errorf("Lookup(%q) = %v, %v; want ok %v", tt.name, got, ok, tt.ok)
		}
	}
}
