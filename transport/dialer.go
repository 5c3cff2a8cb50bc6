package transport

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Backoff is capped exponential backoff with full jitter. Not safe for
// concurrent use; each dialer owns one.
type Backoff struct {
	Min, Max time.Duration // defaults 500ms and 30s
	// Rand returns a float in [0,1); nil uses math/rand/v2. Tests pin it.
	Rand    func() float64
	attempt int
}

// Next returns the wait before the next attempt: a random duration in
// [d/2, d] where d doubles per failure from Min up to Max. Half the range
// is kept so peers retrying together spread out without waiting ~0.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = 500 * time.Millisecond
	}
	if hi <= 0 {
		hi = 30 * time.Second
	}
	d := lo
	for i := 0; i < b.attempt && d < hi; i++ {
		d *= 2
	}
	if d > hi {
		d = hi
	}
	b.attempt++
	r := rand.Float64
	if b.Rand != nil {
		r = b.Rand
	}
	return d/2 + time.Duration(r()*float64(d/2))
}

// Reset starts again from Min (after a connection that lasted).
func (b *Backoff) Reset() { b.attempt = 0 }

// Dialer keeps one address connected: it dials, hands the connection to
// OnConn, waits for it to close and dials again, backing off on failures.
type Dialer struct {
	Endpoint Endpoint
	Addr     string
	// PeerID is the key the peer must prove ("" = any). After the first
	// success the learned id is passed to Skip.
	PeerID  string
	Backoff Backoff
	// Skip, when it returns true for the peer's id, postpones a dial (the
	// peer is already connected another way). Called with "" when the id
	// is not known yet.
	Skip func(peerID string) bool
	// OnConn receives each new connection (before Run waits for it to close).
	OnConn func(Conn)
	// OnFail receives each failed attempt.
	OnFail func(err error)
	// OnAttempt is called before each dial.
	OnAttempt func()
	// Attempt, when set, derives each dial's context from Run's, for the
	// peer id Skip saw; release is called once the dial has returned. A
	// dial cancelled this way while Run's context is live (another path
	// reached the peer first) is neither a failure nor a success: Run
	// goes back to Skip.
	Attempt func(ctx context.Context, peerID string) (actx context.Context, release func())
	// After is called once each attempt that Skip let through has ended
	// (after OnConn or OnFail), with the id Skip was asked about. Skip and
	// After together let a caller keep one dial per peer in flight.
	After func(peerID string)
	// StableAfter: a connection that lived this long resets the backoff (10s).
	StableAfter time.Duration
	// InitialDelay postpones the first attempt (e.g. to let the peer with
	// the lower id dial first and avoid a duplicate connection).
	InitialDelay time.Duration
	// GiveUpAfter, when > 0, ends Run after that many consecutive failed
	// attempts if no attempt ever succeeded (an address learned second
	// hand that never worked); OnGiveUp is then called.
	GiveUpAfter int
	OnGiveUp    func()
	// IdleCheck is how often a skipped dial checks again (1s).
	IdleCheck time.Duration
	// RetireAfter, when > 0, ends Run once Skip has said no for that
	// long without a break: for an address the caller dials only while
	// it wants more connections, and starts a dialer for again when it
	// does. A dialer that keeps failing is not retired (its backoff
	// grows as it would). OnRetire is then called.
	RetireAfter time.Duration
	OnRetire    func()
}

// Run dials until ctx is done or the address turns out to be our own.
func (d *Dialer) Run(ctx context.Context) {
	peer := d.PeerID
	stable := d.StableAfter
	if stable == 0 {
		stable = 10 * time.Second
	}
	idle := d.IdleCheck
	if idle == 0 {
		idle = time.Second
	}
	if d.InitialDelay > 0 && !Wait(ctx, d.InitialDelay) {
		return
	}
	connected, failures := false, 0
	var skipping time.Time // since when Skip has said no; zero while it has not
	for ctx.Err() == nil {
		if d.Skip != nil && d.Skip(peer) {
			if skipping.IsZero() {
				skipping = time.Now()
			} else if d.RetireAfter > 0 && time.Since(skipping) >= d.RetireAfter {
				if d.OnRetire != nil {
					d.OnRetire()
				}
				return
			}
			if !Wait(ctx, idle) {
				return
			}
			continue
		}
		skipping = time.Time{}
		if d.OnAttempt != nil {
			d.OnAttempt()
		}
		gated := peer // the id Skip saw, released by After
		actx, release := ctx, func() {}
		if d.Attempt != nil {
			actx, release = d.Attempt(ctx, gated)
		}
		c, err := d.Endpoint.Dial(actx, d.Addr, d.PeerID)
		cancelled := actx.Err() != nil
		release()
		if err != nil {
			if d.After != nil {
				d.After(gated)
			}
			if ctx.Err() != nil {
				return
			}
			if cancelled {
				continue // another dial reached the peer first
			}
			if d.OnFail != nil {
				d.OnFail(err)
			}
			if isSelf(err) {
				return
			}
			failures++
			if d.GiveUpAfter > 0 && !connected && failures >= d.GiveUpAfter {
				if d.OnGiveUp != nil {
					d.OnGiveUp()
				}
				return
			}
			if !Wait(ctx, d.Backoff.Next()) {
				return
			}
			continue
		}
		peer = c.PeerID()
		connected, failures = true, 0
		start := time.Now()
		if d.OnConn != nil {
			d.OnConn(c)
		}
		if d.After != nil {
			d.After(gated)
		}
		select {
		case <-c.Done():
		case <-ctx.Done():
			return
		}
		if time.Since(start) >= stable {
			d.Backoff.Reset()
		}
		if !Wait(ctx, d.Backoff.Next()) {
			return
		}
	}
}

func isSelf(err error) bool { return errors.Is(err, ErrSelf) }

// Wait blocks for d or until ctx is done; it reports whether to go on.
// It paces (a retry's delay with Backoff, a punch's gap, a workload's
// rhythm); it never stands in for waiting on an event.
func Wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
