package collect

import (
	"peerdns/agent/store"
)

// idleJitterColl stores system.idlejitter: how late, in microseconds, the
// collecting goroutine got a CPU after its once-a-second timer fired.
// Netdata's idlejitter.plugin runs a thread that sleeps 20 ms over and
// over and charts the minimum, maximum and average lateness of the 50
// wake-ups of each second. In Go each such wake-up goes through the
// runtime's timers and scheduler: measured on the 2-CPU test VM, a 20 ms
// sleep loop costs 0.35-0.45 % of a core, twice everything else this
// package collects, and even a 1 s loop costs ~0.01 %. So this collector
// takes its one sample a second from the wake-up the agent makes anyway;
// min, max and average are that sample (the dimensions stay Netdata's).
// Rounds not woken by the timer (the first one, Collect called directly)
// store nothing.
type idleJitterColl struct {
	c   *chart
	raw [3]float64
}

func newIdleJitter() *idleJitterColl { return &idleJitterColl{} }

func (c *idleJitterColl) name() string { return "idlejitter" }

func (c *idleJitterColl) collect(tk *tick) error {
	if tk.late < 0 {
		return nil
	}
	if c.c == nil {
		c.c = newChart(&store.ChartDef{
			ID: "system.idlejitter", Context: "system.idlejitter", Family: "idlejitter", Title: "CPU Idle Jitter",
			Units: "microseconds lost/s", ChartType: "area", Plugin: "idlejitter.plugin", Priority: 800, UpdateEvery: 1,
			Dims: []store.DimDef{dim("min", "", algAbsolute, 1, 1), dim("max", "", algAbsolute, 1, 1), dim("average", "", algAbsolute, 1, 1)},
		})
	}
	us := float64(tk.late.Microseconds())
	c.raw = [3]float64{us, us, us}
	c.c.emit(tk, c.raw[:])
	return nil
}
