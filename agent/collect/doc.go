// Package collect reads the host every second and appends Netdata's
// system charts to the agent store: the charts of Netdata 1.37's
// proc.plugin, diskspace.plugin, cgroups.plugin, apps.plugin,
// idlejitter.plugin, timex.plugin and slabinfo.plugin (which Netdata
// ships turned off; see slabinfo.go), with Netdata's ids, contexts, families, titles,
// units, chart types, priorities, plugin/module names and dimension ids,
// names, algorithms and multipliers/divisors (checked against the
// reference catalog of the VM the fixtures come from:
// testdata/netdata137_system_charts.json, TestCatalogMatchesNetdata).
// README.md lists every collector, its charts and its sources.
//
// One file per collector. Each collector reads its /proc and /sys files
// through kept-open readers (procReader: one pread per file per second
// into a reused buffer), parses in place without allocating and stores
// points without a per-point allocation (TestCollectAllocs: 0 allocations
// in a round). Directory walks (disks, mounts, zram devices every 30 s,
// cgroups every 10 s, file descriptors every 10 s) and new devices,
// processes and cgroups allocate. Collectors take a root directory so
// tests run them on fixture trees under testdata/ (linux-6.18 captured
// from the reference VM; linux-4.19, cgroup-v1 and cgroup-v2 written from
// those kernels' formats).
//
// Counters become per-second rates the way Netdata's incremental
// dimensions do: the first sample gives no point, a counter that goes
// backwards (a reset, a wrap, a device replaced) gives a gap, never a
// negative rate (the CPU charts, shares of a row's increase, give 0 for
// a dimension that went backwards, as Netdata does: iowait may).
// Devices, interfaces, mounts, CPUs, cgroups and services that disappear
// lose their charts (store.Remove); when they return they get new ones. At most maxInstances (1,000) instances of one kind are
// charted; the rest are left out with one log line. Malformed lines are
// skipped; a file with nothing parseable fails its collector, which the
// Manager logs once and retries every second while the others go on.
// Collectors run one after another; the one call that can block for good,
// statfs(2) on a hung network filesystem, runs on a goroutine of its own
// that a round waits for at most half a second (diskspace.go).
//
// Differences from Netdata, on purpose:
//   - Netdata hides many charts until a counter leaves zero (its "auto"
//     mode: network stack, per-interface errors/drops/fifo/compressed/
//     events, interrupts and softirqs per source). Here a chart exists as
//     soon as the kernel has its counters, so the catalog does not change
//     under the dashboard and no chart resets its history when a
//     dimension would appear. Idle virtual disks (unused loop devices)
//     stay hidden, as in Netdata.
//   - system.load is collected every second (Netdata: every 5 s) so every
//     chart shares the 1-second grid.
//   - system.idlejitter samples the collector's own once-a-second wake-up
//     instead of a 20 ms sleep loop (see idlejitter.go for the cost).
//   - apps.plugin: see apps.go (built-in groups, per-process deltas,
//     descriptors counted every 10 s).
//   - cgroups: container names are the cgroup directory names (Netdata's
//     rename script, docker inspect, is not run).
//   - system.net falls back to all interfaces but lo when the host has no
//     physical one (containers).
//
// Sources this host (and the reference VM) does not have, so their charts
// are absent here: CPU frequency (cpufreq) and cpuidle states (not charted
// by Netdata there either), NUMA (one node), swap (none: system.swap),
// huge pages, ECC (mem.hwcorrupt), IRQ pressure, cgroups (the hierarchies
// are mounted but empty), System V message queues. Not built: nfacct.plugin
// (netfilter.netlink_*, conntrack over netlink; /proc/net/stat/nf_conntrack
// gives the same counters as netfilter.conntrack_*) and the netdata.*
// charts of Netdata's internals the agent has no counterpart of (self.go
// keeps the ones it has).
//
// The package knows nothing about HTTP.
package collect
