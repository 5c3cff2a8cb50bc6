package collect

import (
	"sync"
	"time"

	"peerdns/agent/store"
)

// idleJitterSleep is how long the measuring goroutine asks to sleep, as
// Netdata's idlejitter.plugin does (20 ms).
const idleJitterSleep = 20 * time.Millisecond

// idleJitterColl stores system.idlejitter: a goroutine sleeps 20 ms over
// and over and measures how much later than asked it woke up; each tick
// stores the minimum, maximum and average lateness (µs) since the last
// one. The goroutine starts at the first tick and stops at close. It costs
// 50 wake-ups a second, as Netdata's thread does.
type idleJitterColl struct {
	sleep func(time.Duration) time.Duration // sleeps, returns the time actually slept

	mu            sync.Mutex // guards the fields below (the goroutine writes them)
	min, max, sum float64
	n             int
	started       bool
	stop          chan struct{}
	done          chan struct{}
	c             *chart
	raw           [3]float64
}

func newIdleJitter() *idleJitterColl {
	return &idleJitterColl{sleep: func(d time.Duration) time.Duration {
		t := time.Now()
		time.Sleep(d)
		return time.Since(t)
	}}
}

func (c *idleJitterColl) name() string { return "idlejitter" }

func (c *idleJitterColl) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		late := float64((c.sleep(idleJitterSleep) - idleJitterSleep).Microseconds())
		late = max(late, 0)
		c.mu.Lock()
		if c.n == 0 || late < c.min {
			c.min = late
		}
		if c.n == 0 || late > c.max {
			c.max = late
		}
		c.sum += late
		c.n++
		c.mu.Unlock()
	}
}

func (c *idleJitterColl) close() {
	c.mu.Lock()
	started := c.started
	c.started = false
	c.mu.Unlock()
	if started {
		close(c.stop)
		<-c.done
	}
}

func (c *idleJitterColl) collect(tk *tick) error {
	c.mu.Lock()
	if !c.started {
		c.started = true
		c.stop, c.done = make(chan struct{}), make(chan struct{})
		go c.run()
	}
	n := c.n
	if n > 0 {
		c.raw = [3]float64{c.min, c.max, c.sum / float64(n)}
	}
	c.n, c.sum = 0, 0
	c.mu.Unlock()
	if n == 0 {
		return nil // the goroutine has not woken up yet
	}
	if c.c == nil {
		c.c = newChart(&store.ChartDef{
			ID: "system.idlejitter", Context: "system.idlejitter", Family: "idlejitter", Title: "CPU Idle Jitter",
			Units: "microseconds lost/s", ChartType: "area", Plugin: "idlejitter.plugin", Priority: 800, UpdateEvery: 1,
			Dims: []store.DimDef{dim("min", "", algAbsolute, 1, 1), dim("max", "", algAbsolute, 1, 1), dim("average", "", algAbsolute, 1, 1)},
		})
	}
	c.c.emit(tk, c.raw[:])
	return nil
}
