// Package procs reads the live process table of a Linux host for the
// agent's /api/vN/processes: pid, parent, name, command line, user,
// state, CPU %, resident memory, threads and start time, sorted,
// filtered and paged.
//
// It owns its own sampling and never changes a process. It must never
// read more than /proc/<pid>/{stat,cmdline} and the /proc/<pid>
// directory's owner per process, and never keep a request waiting on a
// second scan while another request is scanning (they share one).
//
// # Decisions
//
// Direct /proc reads, not gopsutil. gopsutil's process package opens
// stat, status and cmdline separately per field asked and builds a
// Process object per pid; for the ten columns here that is several files
// and allocations per process where two reads do. BenchmarkScan and
// BenchmarkScanGopsutil in this package measure both over this host's
// processes.
//
// CPU %. The share of one CPU a process used between two scans (as top
// shows it: a process busy on two cores is 200), from utime+stime in
// /proc/<pid>/stat over the wall time between the scans. A scan is reused
// for a second (MaxAge), so a burst of requests costs one scan; a
// request that finds the last scan older than a second scans again and
// measures against the previous one. When there is no previous scan, or
// it is older than ten seconds (the rate would average over a long,
// stale span), the sampler scans twice, 200 ms apart; only that first
// request waits.
//
// User. The owner of /proc/<pid> (the process's effective uid when it
// started, as ps shows), named from the system user database and cached
// per uid; an unknown uid is shown as its number. Names are looked up off
// the sampler's lock (through NSS a lookup may wait on LDAP or SSSD for
// seconds) and a table waits at most 100 ms for the names it asked for:
// a uid whose name takes longer shows as its number until it comes.
//
// Times. /proc counts in USER_HZ ticks, which Linux fixes at 100 for
// userspace (the kernel scales its internal HZ); start times are boot time
// (btime in /proc/stat) plus the start tick.
//
// Other systems. Without /proc every call returns ErrUnsupported and the
// API answers 501 saying so.
package procs
