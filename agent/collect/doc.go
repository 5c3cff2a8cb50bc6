// Package collect reads the host every second and appends Netdata's system
// charts to the agent store: system.cpu and cpu.cpuN, system.load,
// system.ram, mem.available, system.swap (when the host has swap),
// system.io, disk.<dev>, disk_ops.<dev>, disk_util.<dev>, disk_space.<mount>,
// disk_inodes.<mount>, mem.committed, system.net,
// net.<iface>, net_packets.<iface>, system.processes, system.forks,
// system.ctxt, system.intr, system.uptime and system.entropy, with
// Netdata's ids, contexts, families, titles, units, chart types,
// priorities, plugin/module names and dimension ids, names, algorithms and
// multipliers/divisors (from the 1.37 reference catalog).
//
// One file per collector. Readers are functions so tests feed known
// counters. Counters become per-second rates the way Netdata's incremental
// dimensions do (the first sample gives no point; a counter that goes
// backwards gives a gap). gopsutil reads cpu, memory, load, uptime, mounts,
// statfs and diskstats; /proc/stat (ctxt, intr, processes, procs_*),
// /proc/net/dev (gopsutil has no multicast column) and entropy_avail are
// read directly through kept-open files.
//
// Titles are Netdata's raw titles ("Total CPU utilization"); its
// /api/v1/charts shows them with " (<chart id>)" appended.
//
// Differences from Netdata, on purpose: system.load is collected every
// second (Netdata: every 5 s) so every chart shares the 1-second grid;
// system.uptime has whole seconds (sysinfo); system.net falls back to all
// interfaces but lo when the host has no physical one (containers).
//
// The package knows nothing about HTTP.
package collect
