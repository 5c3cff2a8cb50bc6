package procs

import (
	"os"
	"strconv"
	"strings"
)

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
// until the next timer while the node is idle. A node alone on its
// machine, idle for 60 s (embedded defaults, two runs each,
// alternating): 0.80-0.83% of a core and 120-121 thread switches a
// second with it, 0.33-0.35% and 55-61 without (GODEBUG=schedtrace=0,
// the operator's way out, for a laptop on battery). And on a machine up
// for more than 24.8 days (the runtime counts from boot) the runtime
// writes one "SCHED" line to stderr at start and then one every 24.8
// days.
const SysmonTrace = "schedtrace=2147483647"

// SysmonEnv returns environ with SysmonTrace added to GODEBUG, and true;
// or environ and false when GODEBUG already sets schedtrace (the
// operator's value is kept: GODEBUG=schedtrace=0 turns this off).
func SysmonEnv(environ []string) ([]string, bool) {
	out := make([]string, 0, len(environ)+1)
	debug := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			debug = v
			continue
		}
		out = append(out, kv)
	}
	if _, set := schedtrace(debug); set {
		return environ, false
	}
	if debug != "" {
		debug += ","
	}
	return append(out, "GODEBUG="+debug+SysmonTrace), true
}

// SysmonAwake reports whether this process runs with a schedtrace period
// (SysmonTrace's or the operator's): then sysmon never deep-sleeps.
func SysmonAwake(getenv func(string) string) bool {
	v, _ := schedtrace(getenv("GODEBUG"))
	n, err := strconv.Atoi(v)
	return err == nil && n > 0
}

// schedtrace is the schedtrace value in a GODEBUG string, if it sets one.
func schedtrace(debug string) (value string, set bool) {
	for _, s := range strings.Split(debug, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(s), "schedtrace="); ok {
			return v, true
		}
	}
	return "", false
}

// ExecWithSysmonAwake replaces this process (same PID, arguments and
// environment) with itself run with SysmonTrace, since GODEBUG is read
// once, when the runtime starts. It returns only when it did not: the
// setting is there already, GODEBUG sets schedtrace, the platform has no
// exec (nil), or the executable could not be run again (the error).
func ExecWithSysmonAwake() error {
	env, add := SysmonEnv(os.Environ())
	if !add || execve == nil {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return execve(exe, os.Args, env)
}
