package procs

import "strconv"

// SysmonTrace is the GODEBUG setting the node runs with: a schedtrace
// period of 2^31-1 ms (24.8 days), the largest the runtime takes.
//
// Why: the Go runtime's sysmon thread goes into a deep sleep whenever
// every P is idle, and the next system call any goroutine makes wakes it
// (a futex wake and a thread switch) and sets it polling every 20 µs
// again for a millisecond or more. A node on one P (see the package doc)
// that carries a request through a tunnel goes idle between packets
// thousands of times a second, so sysmon woke, polled and slept again
// all the time: 12-17% of each node's CPU in the profile of the tunnel
// route. The runtime offers no setting for sysmon (golang/go#18236), but
// it never deep-sleeps while schedtrace is on; with the longest period
// it backs off to a 10 ms poll when there is nothing to retake, as it
// does when busy. Measured (bench/README.md, "Sysmon"): the edge through
// a tunnel 14.7-15.0k req/s at 36 + 41 µs of CPU per request on the two
// nodes against 8.9-11.5k at 47-60 + 58-74; DNS 177-180k queries/s
// against 165-166k.
//
// The price: sysmon polls at least every 10 ms instead of sleeping
// while the node is idle; an idle node's timers (peer heartbeats) wake
// it that often anyway: 0.6-0.7% of a core and 122-124 thread switches a
// second idle, with or without. And on a machine up for more than 24.8
// days (the runtime counts from boot) the runtime writes one "SCHED" line
// to stderr at start and then one every 24.8 days.
const SysmonTrace = "schedtrace=2147483647"

// SysmonAwake reports whether this process runs with a schedtrace period
// (SysmonTrace's or the operator's): then sysmon never deep-sleeps.
func SysmonAwake(getenv func(string) string) bool {
	v, _ := setting(getenv("GODEBUG"), "schedtrace")
	n, err := strconv.Atoi(v)
	return err == nil && n > 0
}
