package procs

// PreemptOff is the GODEBUG setting that turns off the runtime's
// signal-based preemption; goroutines are still preempted at function
// calls, as before Go 1.14.
//
// Why: sysmon asks a goroutine to stop once it has run 10 ms of wall
// time, and the garbage collector asks every running one at each cycle,
// by sending its thread a signal. On a machine whose cores are shared
// (a node beside its load, in a container with a CPU quota, fifty nodes
// on two cores) a thread the kernel puts aside mid-work looks to sysmon
// as if it ran long, so the signals come all the time, and each costs a
// kernel signal delivery, a return from it and a trip through the
// scheduler. Measured on fifty node processes on two cores, in a CPU
// profile of a burst of 100 claims: runtime.asyncPreempt held 13% of
// every sample (42.2 s of samples with it, 29.1 s without, for the same
// burst); bench/README.md, "fifty processes". On a machine with cores
// to spare the signals are rare, so turning them off changes nothing
// there.
//
// The price: a loop without function calls cannot be preempted. The
// node has none that runs long (its loops over ops, frames and records
// call out; the runtime's own memmove and hashing cannot be preempted
// either way); a long one would delay the collector's stop-the-world
// and other goroutines, never change a result. GODEBUG=asyncpreemptoff=0
// in the node's environment keeps Go's default.
const PreemptOff = "asyncpreemptoff=1"
