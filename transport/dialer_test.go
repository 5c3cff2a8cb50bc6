package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/transport/identity"
)

func TestBackoffCappedAndJittered(t *testing.T) {
	for _, r := range []float64{0, 0.5, 0.999} {
		b := Backoff{Min: 100 * time.Millisecond, Max: time.Second, Rand: func() float64 { return r }}
		prevHi := time.Duration(0)
		for i := 0; i < 10; i++ {
			d := b.Next()
			hi := 100 * time.Millisecond << i
			if hi > time.Second {
				hi = time.Second
			}
			if d < hi/2 || d > hi {
				t.Fatalf("r=%v attempt %d: Next() = %v, want in [%v, %v]", r, i, d, hi/2, hi)
			}
			if hi < prevHi {
				t.Fatalf("ceiling went down")
			}
			prevHi = hi
		}
		b.Reset()
		if d := b.Next(); d > 100*time.Millisecond {
			t.Fatalf("after Reset Next() = %v", d)
		}
	}
}

func TestDialerReconnectsAndBacksOff(t *testing.T) {
	a, _ := newTestEndpoint(t)
	b, _ := newTestEndpoint(t)
	var conns, fails, attempts atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	d := &Dialer{
		Endpoint:  b,
		Addr:      a.Addr().String(),
		PeerID:    a.ID(),
		Backoff:   Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond},
		OnAttempt: func() { attempts.Add(1) },
		OnConn:    func(Conn) { conns.Add(1) },
		OnFail:    func(error) { fails.Add(1) },
	}
	go func() { d.Run(ctx); close(done) }()
	// Accept and close the first two connections: the dialer redials.
	for i := 0; i < 2; i++ {
		c, err := a.Accept(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		c.Close("go away")
	}
	c, err := a.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if conns.Load() < 3 {
			return errors.New("fewer than 3 connections")
		}
		return nil
	})
	cancel()
	<-done
	c.Close("end")

	// A dialer to a closed address fails and retries with backoff.
	dead, _ := identity.Generate()
	closed, _ := Listen(Config{Identity: dead, ListenAddr: "127.0.0.1:0", HandshakeTimeout: 100 * time.Millisecond})
	addr := closed.Addr().String()
	closed.Close()
	fails.Store(0)
	ctx2, cancel2 := context.WithCancel(context.Background())
	short, _ := Listen(Config{Identity: dead, ListenAddr: "127.0.0.1:0", HandshakeTimeout: 100 * time.Millisecond})
	defer short.Close()
	d2 := &Dialer{Endpoint: short, Addr: addr, Backoff: Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond}, OnFail: func(error) { fails.Add(1) }}
	done2 := make(chan struct{})
	go func() { d2.Run(ctx2); close(done2) }()
	testutil.Eventually(t, 10*time.Second, func() error {
		if fails.Load() < 2 {
			return errors.New("fewer than 2 failures")
		}
		return nil
	})
	cancel2()
	<-done2
}

func TestDialerStopsOnSelf(t *testing.T) {
	a, _ := newTestEndpoint(t)
	var failed atomic.Int32
	d := &Dialer{Endpoint: a, Addr: a.Addr().String(), OnFail: func(err error) {
		if errors.Is(err, ErrSelf) {
			failed.Add(1)
		}
	}}
	done := make(chan struct{})
	go func() { d.Run(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("dialer kept dialing itself")
	}
	if failed.Load() != 1 {
		t.Fatalf("self failures = %d, want 1", failed.Load())
	}
}

func TestDialerSkip(t *testing.T) {
	a, _ := newTestEndpoint(t)
	b, _ := newTestEndpoint(t)
	var asked atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	d := &Dialer{Endpoint: b, Addr: a.Addr().String(), PeerID: a.ID(), IdleCheck: time.Millisecond,
		Skip: func(id string) bool { asked.Add(1); return id == a.ID() }, OnConn: func(Conn) { t.Error("dialed a skipped peer") }}
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	testutil.Eventually(t, 5*time.Second, func() error {
		if asked.Load() < 3 {
			return errors.New("Skip not consulted repeatedly")
		}
		return nil
	})
	cancel()
	<-done
}

func TestDialerGivesUpOnAddressThatNeverWorked(t *testing.T) {
	checkLeaks(t)
	n := NewMemNetwork()
	id, _ := identity.Generate()
	ep := n.Listen(id, nil)
	defer ep.Close()
	var fails atomic.Int32
	gaveUp := make(chan struct{})
	d := &Dialer{Endpoint: ep, Addr: "127.0.0.1:1", Backoff: Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond},
		GiveUpAfter: 3, OnFail: func(error) { fails.Add(1) }, OnGiveUp: func() { close(gaveUp) }}
	go d.Run(context.Background())
	select {
	case <-gaveUp:
	case <-time.After(10 * time.Second):
		t.Fatal("dialer never gave up")
	}
	if fails.Load() != 3 {
		t.Fatalf("failures before giving up = %d, want 3", fails.Load())
	}
}

// stallEndpoint's dials wait until their context ends.
type stallEndpoint struct{ Endpoint }

func (stallEndpoint) Dial(ctx context.Context, addr, peerID string) (Conn, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A dial cancelled through Attempt (another path reached the peer) is not
// a failure: the dialer goes back to Skip, and neither OnFail nor the
// backoff sees it.
func TestDialerAttemptCancelledIsNoFailure(t *testing.T) {
	a, _ := newTestEndpoint(t)
	var (
		mu       sync.Mutex
		cancels  []context.CancelFunc
		skips    atomic.Int32
		released atomic.Int32
	)
	ctx, cancel := context.WithCancel(context.Background())
	d := &Dialer{Endpoint: stallEndpoint{a}, Addr: "127.0.0.1:1", PeerID: "p", IdleCheck: time.Millisecond,
		Skip:   func(string) bool { skips.Add(1); return false },
		OnFail: func(err error) { t.Errorf("a cancelled attempt reported as failed: %v", err) },
		Attempt: func(ctx context.Context, id string) (context.Context, func()) {
			actx, c := context.WithCancel(ctx)
			mu.Lock()
			cancels = append(cancels, c)
			mu.Unlock()
			return actx, func() { released.Add(1); c() }
		}}
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	for i := 1; i <= 3; i++ {
		testutil.Eventually(t, 5*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(cancels) < i {
				return errors.New("no attempt in flight")
			}
			return nil
		})
		mu.Lock()
		cancels[i-1]()
		mu.Unlock()
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if released.Load() < 3 || skips.Load() < 4 {
			return fmt.Errorf("released %d, Skip asked %d times", released.Load(), skips.Load())
		}
		return nil
	})
	cancel()
	<-done
	if d.Backoff.attempt != 0 {
		t.Fatalf("backoff advanced %d times by cancelled attempts", d.Backoff.attempt)
	}
}
