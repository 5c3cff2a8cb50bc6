// Package health evaluates the agent's built-in alert rules, after Netdata
// 1.37's stock health.d files: 10min_cpu_usage and 10min_cpu_iowait on
// system.cpu, ram_in_use on system.ram, ram_available on mem.available,
// used_swap on system.swap, disk_space_usage on every disk.space chart,
// disk_inode_usage on every disk.inodes chart and
// load_average_1/5/15 on system.load. Each alert is CLEAR, WARNING or
// CRITICAL (UNINITIALIZED before its first evaluation, UNDEFINED without
// data), with Netdata's hysteresis: the thresholds depend on the current
// status, e.g. warn: $this > (($status >= $WARNING) ? (75) : (85)).
//
// Every status change is a Transition (Netdata's alarm_log entry), kept in
// memory and in DIR/health.db (buntdb via internal/store, fsynced once a
// second), at most MaxTransitions of them. After a restart each alert
// starts from the status of its last recorded transition, so hysteresis
// and the log continue instead of every alert re-logging UNINITIALIZED →
// CLEAR. Alert ids are stable (a hash of rule name and chart). The
// alerts of a chart that goes away (an unmounted disk) go with it, as
// Netdata's do, so mounts that come and go do not pile up alerts; a
// chart that returns starts its alerts afresh.
//
// Not done (Netdata has them): notification delays and repeats, silencing,
// user-defined rules, alarm variables.
package health
