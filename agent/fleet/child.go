package fleet

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"peerdns/agent/store"
	"peerdns/messages"
	"peerdns/transport"
)

// ChildConfig configures the streamer of a child agent.
type ChildConfig struct {
	DB                    *store.DB
	Hello                 messages.StreamHello
	ParentKey, ParentAddr string
	// Endpoint dials the parent (the agent's own peer endpoint).
	Endpoint transport.Endpoint
	// Interval is how often new points are sent (1s).
	Interval time.Duration
	// Window is how many batches may wait for the parent's ack (8): past
	// it the child stops reading its store until an ack comes
	// (backpressure), so a slow parent costs the child no memory.
	Window int
	// MaxValues bounds the values of one batch (50,000: about 450 KB of
	// CBOR at worst, under the 1 MiB frame limit).
	MaxValues int
	Log       *slog.Logger
}

// Child streams a child agent's tier-0 points to its parent. The buffer
// is the child's own tier-0 ring: the parent says at each connection the
// newest second it holds per chart and the child resends from there, so a
// disconnect shorter than the child's tier-0 retention leaves no gap and
// costs no extra memory. Longer ones lose the seconds the ring no longer
// holds (counted in Gaps).
type Child struct {
	cfg ChildConfig
	// Sent counts points sent, Gaps seconds lost to the ring, Sessions
	// connections made, Dropped points the parent refused.
	Sent, Gaps, Sessions, Dropped atomic.Int64
	connected                     atomic.Bool
}

// NewChild makes a streamer; Run starts it.
func NewChild(cfg ChildConfig) *Child {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Window <= 0 {
		cfg.Window = 8
	}
	if cfg.MaxValues <= 0 {
		cfg.MaxValues = 50000
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Child{cfg: cfg}
}

// Connected reports whether a stream to the parent is up.
func (c *Child) Connected() bool { return c.connected.Load() }

// Run streams until ctx is done, reconnecting with capped backoff.
func (c *Child) Run(ctx context.Context) {
	bo := transport.Backoff{Min: 200 * time.Millisecond, Max: 30 * time.Second}
	for ctx.Err() == nil {
		start := time.Now()
		err := c.session(ctx)
		c.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			bo.Reset()
		}
		c.cfg.Log.Warn("stream to parent ended; reconnecting", "parent", c.cfg.ParentAddr, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(bo.Next()):
		}
	}
}

func (c *Child) session(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conn, err := c.cfg.Endpoint.Dial(ctx, c.cfg.ParentAddr, c.cfg.ParentKey)
	if err != nil {
		return err
	}
	defer conn.Close("stream ended")
	st, err := conn.OpenStream(ctx)
	if err != nil {
		return err
	}
	defer st.Abort()
	go func() { <-ctx.Done(); st.Abort() }()
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	h := c.cfg.Hello
	req := &messages.AgentRequest{Method: messages.AgentStream, Nonce: nonce, TimeUnixNano: time.Now().UnixNano(), Stream: &h}
	if err := messages.WriteFrame(st, req, messages.AgentMaxFrame); err != nil {
		return err
	}
	var rep messages.AgentReply
	_ = st.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := messages.ReadFrame(st, &rep, messages.AgentMaxFrame); err != nil {
		return fmt.Errorf("parent reply: %w", err)
	}
	_ = st.SetReadDeadline(time.Time{})
	if rep.Status != 200 {
		return fmt.Errorf("parent refused the stream: %d %s", rep.Status, rep.Error)
	}
	c.Sessions.Add(1)
	c.connected.Store(true)

	credits := make(chan struct{}, c.cfg.Window)
	for i := 0; i < c.cfg.Window; i++ {
		credits <- struct{}{}
	}
	ackErr := make(chan error, 1)
	go func() {
		for {
			var a messages.StreamAck
			if err := messages.ReadFrame(st, &a, messages.AgentMaxFrame); err != nil {
				ackErr <- err
				return
			}
			c.Dropped.Add(int64(a.Dropped))
			if a.Error != "" {
				ackErr <- errors.New("parent: " + a.Error)
				return
			}
			select {
			case credits <- struct{}{}:
			default:
				// Every credit is back: the parent acked a batch that
				// is not in flight.
				ackErr <- fmt.Errorf("parent acked batch %d with none in flight", a.Seq)
				return
			}
		}
	}()

	cursor := rep.Resume
	if cursor == nil {
		cursor = map[string]int64{}
	}
	sentDef := map[string]*store.ChartDef{}
	var seq uint64
	tick := time.NewTicker(c.cfg.Interval)
	defer tick.Stop()
	for {
		b, more := c.batch(cursor, sentDef)
		if b != nil {
			select {
			case <-credits:
			case err := <-ackErr:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
			seq++
			b.Seq = seq
			_ = st.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if err := messages.WriteFrame(st, b, messages.AgentMaxFrame); err != nil {
				return err
			}
		}
		if more {
			continue // catching up after a reconnect: no wait
		}
		select {
		case <-tick.C:
		case err := <-ackErr:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// batch collects the points after cursor, up to MaxValues; more says
// whether points were left for the next batch.
func (c *Child) batch(cursor map[string]int64, sentDef map[string]*store.ChartDef) (*messages.StreamBatch, bool) {
	b := &messages.StreamBatch{}
	values := 0
	for _, def := range c.cfg.DB.Charts() {
		first, last, ok := c.cfg.DB.Held(def.ID)
		if !ok || last <= cursor[def.ID] {
			continue
		}
		nd := len(def.Dims)
		if nd > c.cfg.MaxValues {
			// One second of it would not fit a frame: never sent, counted.
			c.Gaps.Add(last - cursor[def.ID])
			cursor[def.ID] = last
			continue
		}
		room := (c.cfg.MaxValues - values) / max(nd, 1)
		if room <= 0 {
			return b, true
		}
		// From the second after the cursor, or the oldest the ring still
		// holds when it has moved past it (a long disconnect, or the
		// first connection).
		next := cursor[def.ID] + 1
		from := max(next, first)
		to := min(last, from+int64(room)-1)
		w, err := c.cfg.DB.QueryFor(store.ReadReplication, def.ID, 0, from, to)
		if err != nil || len(w.Slots) == 0 || len(w.Slots[0]) == 0 {
			continue
		}
		if !def.HasDims(w.Dims) {
			// Redefined since Charts was read: the next batch reads it
			// with the new definition.
			continue
		}
		n := len(w.Slots[0])
		if n > room {
			n = room
		}
		if cursor[def.ID] > 0 && w.Start > next {
			c.Gaps.Add(w.Start - next)
		}
		if sentDef[def.ID] != def {
			sc := messages.StreamChart{
				ID: def.ID, Context: def.Context, Family: def.Family, Title: def.Title, Units: def.Units,
				ChartType: def.ChartType, Priority: def.Priority,
			}
			for _, d := range def.Dims {
				sc.Dims = append(sc.Dims, d.ID)
				sc.DimNames = append(sc.DimNames, d.Name)
			}
			b.Charts = append(b.Charts, sc)
			sentDef[def.ID] = def
		}
		rows := make([][]float64, n)
		flat := make([]float64, n*nd)
		for k := 0; k < n; k++ {
			row := flat[k*nd : (k+1)*nd : (k+1)*nd]
			for d := 0; d < nd; d++ {
				if s := w.Slots[d][k]; s.Count > 0 {
					row[d] = s.Sum
				} else {
					row[d] = math.NaN()
				}
			}
			rows[k] = row
		}
		b.Points = append(b.Points, messages.StreamPoints{Chart: def.ID, Start: w.Start, Values: rows})
		values += n * nd
		cursor[def.ID] = w.Start + int64(n) - 1
		c.Sent.Add(int64(n * nd))
		if cursor[def.ID] < last {
			return b, true
		}
	}
	if len(b.Points) == 0 && len(b.Charts) == 0 {
		return nil, false
	}
	return b, false
}
