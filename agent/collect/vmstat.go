package collect

import "os"

// Paging, swap I/O, page faults, OOM kills and NUMA events from
// /proc/vmstat (Netdata's proc_vmstat): system.swapio, system.pgpgio,
// mem.pgfaults, mem.oom_kill (kernels 4.13+) and mem.numa (only on hosts
// with more than one NUMA node, as Netdata does: a one-node host counts
// every allocation as local and the chart says nothing).

func vmstatCharts(numa bool) []kvChart {
	const m = "/proc/vmstat"
	page := int64(os.Getpagesize())
	g := func(id, family, title, units, chartType string, prio int, dims ...kd) kvChart {
		return kvDef(id, id, family, title, units, chartType, m, prio, dims...)
	}
	cs := []kvChart{
		g("system.swapio", "swap", "Swap I/O", "KiB/s", "area", 250,
			inc("pswpin", "in", "", page, 1024), inc("pswpout", "out", "", -page, 1024)),
		g("system.pgpgio", "disk", "Memory Paged from/to disk", "KiB/s", "area", 151,
			inc("pgpgin", "in", "", 1, 1), inc("pgpgout", "out", "", -1, 1)),
		g("mem.pgfaults", "system", "Memory Page Faults", "faults/s", "line", 1040,
			inc("pgfault", "minor", "", 1, 1), inc("pgmajfault", "major", "", -1, 1)),
		g("mem.oom_kill", "system", "Out of Memory Kills", "kills/s", "line", 1020,
			inc("oom_kill", "kills", "", 1, 1)),
	}
	if numa {
		cs = append(cs, g("mem.numa", "numa", "NUMA events", "events/s", "line", 1300,
			inc("numa_local", "local", "", 1, 1), inc("numa_foreign", "foreign", "", 1, 1),
			inc("numa_interleave", "interleave", "", 1, 1), inc("numa_other", "other", "", 1, 1),
			inc("numa_pte_updates", "pte_updates", "pte updates", 1, 1),
			inc("numa_huge_pte_updates", "huge_pte_updates", "huge pte updates", 1, 1),
			inc("numa_hint_faults", "hint_faults", "hint faults", 1, 1),
			inc("numa_hint_faults_local", "hint_faults_local", "hint faults local", 1, 1),
			inc("numa_pages_migrated", "pages_migrated", "pages migrated", 1, 1)))
	}
	return cs
}

// numaNodes counts /sys/devices/system/node/node*.
func numaNodes(root string) int {
	es, err := os.ReadDir(root + "/sys/devices/system/node")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range es {
		if len(e.Name()) > 4 && e.Name()[:4] == "node" {
			n++
		}
	}
	return n
}

func newVmstat(root string) *kvColl {
	return newKVColl("vmstat", vmstatCharts(numaNodes(root) > 1), &kvSource{path: root + "/proc/vmstat", parse: parseKeyValue})
}
