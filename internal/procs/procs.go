// Package procs lets a node's GOMAXPROCS follow what it needs: one P
// while the process uses less than a core, every core (the runtime's own
// default, which honours a cgroup limit) once it needs more.
//
// Why: with more Ps than it keeps busy, the Go runtime wakes an idle P's
// thread at nearly every hand-off between goroutines (a netpoll wake-up,
// a channel send: wakep starts a spinning M, which finds nothing and goes
// back to sleep on a futex), and sysmon polls every 20 µs while any
// thread sits in a system call. On a node that tunnels or proxies far
// less than a core's worth of work this is a third of its CPU: measured
// on 2 vCPUs, a QUIC tunnel moved 1.22 Gbit/s at 10.4 CPU-s per GB with
// two Ps and 1.76 Gbit/s at 6.2 s/GB with one; the edge proxy spent 48
// µs of CPU per request with two and 39 with one. DNS is the exception:
// its sockets are one per core and independent, and a client waiting on
// each answer gets them sooner from every core at once (one P: 157k
// queries/s against Knot's 170k in the same run; every core: above
// Knot's). So DNS queries arriving at DNSRate or more take the node to
// every core whatever its CPU reads, as do the edge's requests to
// servers on this node at EdgeRate or more (each served start to end by
// one goroutine, side by side: see EdgeRate), and a single P's thread
// running all the time (a flood of anything on a big machine).
//
// The rule (Governor.Step): every tick (100 ms) the process's CPU time
// (user + system, getrusage) over the wall time gives the cores it used.
// At one P, a mean of Up (0.95) cores or more over UpTicks (5) ticks
// means the P's thread runs all the time (see Spare below), and ParTicks
// (2) ticks in a row with parallel work (DNS, the edge's local requests)
// arriving mean it is wanted:
// either goes to Max. Parallel work needs fewer ticks than CPU: its rate
// over a tick is no pipeline's burst but a load of its own (a thousand
// edge requests, or four thousand DNS queries, in two ticks), and every
// tick it waits at one P it is served a sixth slower on 2 vCPUs
// (EdgeRate's figures), and slower still the more cores wait idle beside
// that P; going up for a burst that then stops costs the wake-ups of
// DownTicks at every P, a few per cent of a core. At UpTicks a burst
// of requests would spend its first half second on one P. At Max,
// DownTicks (20) ticks without parallel work
// and a mean below Down (0.85) cores over them mean one P would do: go
// back to 1. The same work
// costs at least as much CPU spread over several Ps (the wake-ups above:
// a third more for a tunnel), so a load that used under 0.85 cores at
// Max uses under 0.95 at one P and stays there; the half-second window at
// one P keeps a pipeline's bursts (a tunnel at one P reads 0.73-0.82
// cores a second, more over a single tick) from counting as saturation.
// Should a load bounce anyway (back up within BounceTicks of going down),
// the next wait before going down doubles, up to MaxDownTicks; holding a
// P count that long resets it.
//
// A second P helps only if a core is free to run its thread, so going up
// on CPU also needs a mean of Spare (0.5) cores idle on the machine over
// the window (the machine's idle and iowait time: /proc/stat on Linux,
// gopsutil's cpu.Times elsewhere), read only at one P on ticks of at
// least half of Up: a node far below a core never needs it.
// On a machine the node shares with its load (a proxy with its client and
// backend on the same two cores, 80-85% busy), more Ps only fight the
// same cores when the node's goroutines hand work to one another: the
// edge's same-node route read 20.3-22.7k req/s at 34-39 µs of CPU a
// request on one P and 20.4-22.8k at 42-49 µs on two, before its
// per-request costs were cut (it now reads more on two at the same CPU:
// see EdgeRate); a QUIC tunnel still does. Under contention the
// node's single thread may also get less than a core although its P is
// busy; then it stays at one P too. Parallel work is exempt: DNS's rule
// was measured against Knot on a machine shared with the load
// generator, the edge's beside bare fasthttp and nginx on one shared
// with its client and backend.
//
// OneP tells other packages whether the process is on one P now (the
// governor's Set keeps it in step): transport orders a stream write's
// wake-up of quic-go's connection loop by it (transport/writersfirst.go),
// which pays on one P and would only cost on more.
//
// GOMAXPROCS in the environment turns the governor off (the operator's
// number is kept), as does a machine with one CPU. Setting GOMAXPROCS
// from the program stops the runtime's own updates of it (Go 1.25's
// cgroup-aware default is read once, at start, as Max).
//
// No library does this: automaxprocs and the runtime's default set
// GOMAXPROCS from the CPU quota once, not from the process's demand.
package procs

import (
	"context"
	"math"
	"runtime"
	"time"
)

// DNSRate is the DNS queries a second that take a node to every core.
// Below it one core answers each query as it comes (about 3 µs of CPU
// each: 6% of a core at this rate), so queries seldom wait for one
// another; above it they overlap more and more, and each core's socket
// is best read by its own thread.
const DNSRate = 20_000

// EdgeRate is the edge's HTTP/1.1 requests a second to servers on this
// node (a TCP socket each way, no tunnel stream) that take a node to
// every core. Each is served from its head to its answer by its client
// connection's goroutine (read, write upstream, read the answer, write
// it back), with no hand-off between goroutines: like DNS queries they
// run side by side on every core, and a second P does not cost the
// wake-ups a tunnel's pipeline of goroutines pays. At one P the node
// stays under Up (0.7-0.75 cores on 2 vCPUs, the machine 9-16% idle:
// its one thread waits for a vCPU woken from halt while requests
// queue), so the CPU rule never takes it up. Measured on 2 vCPUs
// (bench/README.md, 2026-12-04): 100 B 23,217 req/s on one P, 27,173 on
// two at the same CPU a request (31.6 / 31.5 µs; bare fasthttp 26,759
// at 31.0); 64 KiB 10,700 → 13,041, p99 7.94 → 5.54 ms. Requests that go
// through a tunnel are not counted: through the QUIC tunnel the 64 KiB
// route read 10% less on two Ps at a quarter more CPU. At this rate a
// request's wake-ups on a second P cost a few per cent of a core at
// most; the 64 KiB route on 2 vCPUs runs twice this.
const EdgeRate = 5_000

// Governor holds the rule's settings and state. The zero value is not
// usable; New fills in the defaults.
type Governor struct {
	Max          int     // Ps when busy
	Up           float64 // cores used at one P that mean it is saturated
	Spare        float64 // idle cores on the machine a saturated P needs to go up
	UpTicks      int     // ticks the mean is taken over, at one P
	ParTicks     int     // ticks in a row with parallel work that go to Max
	Down         float64 // cores used at Max below which one P would do
	DownTicks    int     // ticks the mean is taken over, at Max
	BounceTicks  int     // back up within this many ticks of going down: a bounce
	MaxDownTicks int     // the longest the wait before going down grows to

	procs   int       // current P count
	bounces int       // doublings of DownTicks in the wait before going down
	since   int       // ticks since the last change
	down    bool      // the last change was down to one P
	par     int       // ticks in a row with parallel work arriving
	quiet   int       // ticks in a row without
	used    []float64 // the last ticks' cores, newest last
	spare   []float64 // the last ticks' idle cores on the machine, newest last
}

// New returns a governor for a machine whose default GOMAXPROCS is max,
// starting at one P (a node starts idle).
func New(max int) *Governor {
	return &Governor{
		Max: max, Up: 0.95, Spare: 0.5, UpTicks: 5, ParTicks: 2, Down: 0.85, DownTicks: 20,
		BounceTicks: 50, MaxDownTicks: 600,
		procs: 1,
	}
}

// wait is how many ticks at Max, without parallel work and under Down,
// come before going down: DownTicks, doubled for each bounce, at most
// MaxDownTicks.
func (g *Governor) wait() int {
	return min(g.DownTicks<<g.bounces, g.MaxDownTicks)
}

// Procs is the P count the governor has chosen.
func (g *Governor) Procs() int { return g.procs }

// Step takes the cores used over the last tick, the idle cores on the
// machine over it (+Inf when unknown), and whether work that is served on
// every core at once (DNS queries) arrived at a rate that wants them, and
// returns the P count to run with and whether it changed.
func (g *Governor) Step(cores, spare float64, parallel bool) (procs int, changed bool) {
	g.since++
	if parallel {
		g.par, g.quiet = g.par+1, 0
	} else {
		g.par, g.quiet = 0, g.quiet+1
	}
	wait := g.wait()
	n := max(g.UpTicks, wait)
	g.used = keep(append(g.used, cores), n)
	g.spare = keep(append(g.spare, spare), n)
	saturated := mean(g.used, g.UpTicks) >= g.Up && mean(g.spare, g.UpTicks) >= g.Spare
	switch {
	case g.procs == 1 && g.Max > 1 && (saturated || g.par >= g.ParTicks):
		if g.down && g.since <= g.BounceTicks && wait < g.MaxDownTicks {
			g.bounces++
		}
		g.set(g.Max)
		return g.procs, true
	case g.procs > 1 && g.since >= wait && g.quiet >= wait && mean(g.used, wait) < g.Down:
		g.set(1)
		return g.procs, true
	case g.since >= g.MaxDownTicks:
		g.bounces = 0
	}
	return g.procs, false
}

// keep is the last n of ticks.
func keep(ticks []float64, n int) []float64 {
	if len(ticks) > n {
		return ticks[len(ticks)-n:]
	}
	return ticks
}

// mean is the mean of the last n ticks, or 0 until there are n.
func mean(ticks []float64, n int) float64 {
	if len(ticks) < n {
		return 0
	}
	s := 0.0
	for _, u := range ticks[len(ticks)-n:] {
		s += u
	}
	return s / float64(n)
}

// AnyOf is a parallel signal for Run that is true when any of signals
// is; each is asked at every call (a Grew keeps its count from one call
// to the next).
func AnyOf(signals ...func() bool) func() bool {
	return func() bool {
		busy := false
		for _, f := range signals {
			busy = f() || busy
		}
		return busy
	}
}

// Grew returns a parallel signal for Run: true when count grew by at
// least min since the previous call (the first, since Grew was called).
// Not safe for concurrent use; Run calls it from one goroutine.
func Grew(count func() int64, min int64) func() bool {
	last := count()
	return func() bool {
		c := count()
		grew := c-last >= min
		last = c
		return grew
	}
}

func (g *Governor) set(p int) {
	g.down = p < g.procs
	g.procs = p
	g.since = 0
	g.used = g.used[:0]
	g.spare = g.spare[:0]
}

// Start runs the governor for this process until ctx ends, unless
// GOMAXPROCS is set in the environment, the runtime's default is one P,
// or the platform gives no process CPU time. It returns the most Ps the
// governor will use, 0 when it does not run. The tick is 100 ms.
func Start(ctx context.Context, getenv func(string) string, parallel func() bool, logf func(from, to int, cores float64)) (maxProcs int) {
	maxProcs = runtime.GOMAXPROCS(0)
	if getenv("GOMAXPROCS") != "" || maxProcs < 2 || processCPU == nil {
		return 0
	}
	go Run(ctx, New(maxProcs), 100*time.Millisecond, processCPU, machineIdle, parallel, logf)
	return maxProcs
}

// Run sets GOMAXPROCS to 1 and then follows the governor every tick
// until ctx ends, when it puts back max. cpu returns the process's CPU
// time so far, idle the machine's idle CPU time so far (nil, or not ok:
// unknown, which does not hold the governor back); parallel, if not nil,
// says each tick whether work that wants every core arrived; logf, if
// not nil, is told of each change.
func Run(ctx context.Context, g *Governor, tick time.Duration, cpu func() time.Duration, idle func() (time.Duration, bool), parallel func() bool, logf func(from, to int, cores float64)) {
	Set(g.Procs())
	defer Set(g.Max)
	t := time.NewTicker(tick)
	defer t.Stop()
	if idle == nil {
		idle = func() (time.Duration, bool) { return 0, false }
	}
	last, at := cpu(), time.Now()
	lastIdle, idleOK := idle()
	idleRead := true     // lastIdle was read at the previous tick
	spare := math.Inf(1) // unknown: does not hold the governor back
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			wall := float64(now.Sub(at))
			c := cpu()
			cores := float64(c-last) / wall
			// The machine's idle time only counts for going up from one
			// P on CPU, which takes ticks near a full core: a tick below
			// half of Up skips reading it (on Linux the kernel writes
			// all of /proc/stat out for each read, a few per cent of an
			// idle node's CPU at ten a second) and keeps the last
			// figure. A figure spans one tick: the first read after a
			// skip only starts the next.
			if g.Procs() == 1 && cores >= g.Up/2 {
				i, ok := idle()
				switch {
				case !ok:
					spare = math.Inf(1)
				case idleRead && idleOK:
					spare = float64(i-lastIdle) / wall
				}
				lastIdle, idleOK, idleRead = i, ok, true
			} else {
				idleRead = false
			}
			last, at = c, now
			from := g.Procs()
			if p, changed := g.Step(cores, spare, parallel != nil && parallel()); changed {
				Set(p)
				if logf != nil {
					logf(from, p, cores)
				}
			}
		}
	}
}

// ProcessCPU is the user and system CPU time this process has used, every
// thread's (getrusage: one system call), and false where the platform
// has no getrusage.
func ProcessCPU() (time.Duration, bool) {
	if processCPU == nil {
		return 0, false
	}
	return processCPU(), true
}
