package fleet_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"peerdns/agent/fleet"
	"peerdns/agent/store"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

// A chart the child redefines with other dimensions while it streams (a
// collector's chart whose dimensions change) is read as it is now: the
// definition the chart list gave a moment before may not be the one its
// points have.
func TestChildStreamsAChartBeingRedefined(t *testing.T) {
	p := newParent(t, fleet.ParentConfig{})
	c := newChild(t, p, "alpha", 2)
	ch := fleet.NewChild(fleet.ChildConfig{
		DB: c.db, Endpoint: c.ep.Endpoint(), ParentKey: p.rpc.ID(), ParentAddr: p.rpc.Addr().String(),
		Hello: messages.StreamHello{Hostname: c.name, GUID: "guid-alpha", NodeID: "node-alpha"}, Interval: time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ch.Run(ctx) }()
	defer func() { cancel(); <-done }()

	one := &store.ChartDef{ID: "apps.cpu", Dims: []store.DimDef{{ID: "a"}}}
	three := &store.ChartDef{ID: "apps.cpu", Dims: []store.DimDef{{ID: "a"}, {ID: "b"}, {ID: "c"}}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now().Unix() - 100000
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			def := one
			if i%2 == 1 {
				def = three
			}
			if err := c.db.Register(def); err != nil {
				t.Error(err)
				return
			}
			if err := c.db.Append(def.ID, start+i, make([]float64, len(def.Dims))); err != nil {
				t.Error(err)
				return
			}
			// A turn for the others after each flip: a writer that spins
			// keeps a busy machine's one free CPU for itself, and the
			// child, the transport and the parent each wait out its time
			// slice (10 ms) at every hop of a batch.
			runtime.Gosched()
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	// The child reads the chart again and again as it flips: one stale
	// read of three dimensions with one left crashed it.
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, n := range p.parent.Children() {
			if n.Batches >= 200 {
				return nil
			}
		}
		return fmt.Errorf("%d points sent, %d sessions", ch.Sent.Load(), ch.Sessions.Load())
	})
}
