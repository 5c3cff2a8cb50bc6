package collect

// Memory in detail from /proc/meminfo (Netdata's proc_meminfo): system.ram,
// mem.available, system.swap (hosts with swap), mem.committed,
// mem.writeback, mem.kernel, mem.slab, mem.hugepages (hosts with
// dedicated huge pages), mem.transparent_hugepages and mem.hwcorrupt
// (kernels with ECC support print HardwareCorrupted; most VMs do not).
// Values are in KiB, shown in MiB (divisor 1024) as Netdata does.

// Derived keys (names no kernel prints) that derive fills in.
const (
	kRAMUsed    = "=ram.used"
	kRAMCached  = "=ram.cached"
	kSwapFree   = "=swap.free"
	kSwapUsed   = "=swap.used"
	kHugeFree   = "=huge.free"
	kHugeUsed   = "=huge.used"
	kHugeSurp   = "=huge.surplus"
	kHugeRsvd   = "=huge.reserved"
	kHWCorrupt  = "HardwareCorrupted"
	kHugepageSz = "Hugepagesize"
)

func meminfoCharts() []kvChart {
	const m = "/proc/meminfo"
	mib := func(key, id, name string) kd { return abs(key, id, name, 1, 1024) }
	g := func(id, family, title, chartType string, prio int, dims ...kd) kvChart {
		return kvDef(id, id, family, title, "MiB", chartType, m, prio, dims...)
	}
	all := func(c kvChart) kvChart { c.all = true; return c }
	return []kvChart{
		all(g("system.ram", "ram", "System RAM", "stacked", 200,
			mib("MemFree", "free", ""), mib(kRAMUsed, "used", ""), mib(kRAMCached, "cached", ""), mib("Buffers", "buffers", ""))),
		g("mem.available", "system", "Available RAM for applications", "area", 1010, mib("MemAvailable", "MemAvailable", "avail")),
		all(g("system.swap", "swap", "System Swap", "stacked", 201, mib(kSwapFree, "free", ""), mib(kSwapUsed, "used", ""))),
		g("mem.hwcorrupt", "ecc", "Corrupted Memory detected by ECC", "line", 9000, mib(kHWCorrupt, "HardwareCorrupted", "")),
		g("mem.committed", "system", "Committed (Allocated) Memory", "area", 1030, mib("Committed_AS", "Committed_AS", "")),
		g("mem.writeback", "kernel", "Writeback Memory", "line", 1100,
			mib("Dirty", "Dirty", ""), mib("Writeback", "Writeback", ""), mib("WritebackTmp", "FuseWriteback", ""),
			mib("NFS_Unstable", "NfsWriteback", ""), mib("Bounce", "Bounce", "")),
		g("mem.kernel", "kernel", "Memory Used by Kernel", "stacked", 1101,
			mib("Slab", "Slab", ""), mib("KernelStack", "KernelStack", ""), mib("PageTables", "PageTables", ""),
			mib("VmallocUsed", "VmallocUsed", ""), mib("Percpu", "Percpu", "")),
		g("mem.slab", "slab", "Reclaimable Kernel Memory", "stacked", 1200,
			mib("SReclaimable", "reclaimable", ""), mib("SUnreclaim", "unreclaimable", "")),
		all(g("mem.hugepages", "hugepages", "Dedicated HugePages Memory", "stacked", 1250,
			mib(kHugeFree, "free", ""), mib(kHugeUsed, "used", ""), mib(kHugeSurp, "surplus", ""), mib(kHugeRsvd, "reserved", ""))),
		g("mem.transparent_hugepages", "hugepages", "Transparent HugePages Memory", "stacked", 1251,
			mib("AnonHugePages", "anonymous", ""), mib("ShmemHugePages", "shmem", "")),
	}
}

// deriveMeminfo computes Netdata's derived values: used RAM is what is
// neither free, cache (page cache plus reclaimable slab) nor buffers;
// swap charts exist only with swap; huge page counts become KiB.
func deriveMeminfo(kv *kvValues) {
	total, ok1 := kv.get("MemTotal")
	free, ok2 := kv.get("MemFree")
	cached, ok3 := kv.get("Cached")
	buffers, ok4 := kv.get("Buffers")
	if ok1 && ok2 && ok3 && ok4 {
		sr, _ := kv.get("SReclaimable")
		cached += sr
		kv.put(kRAMCached, cached)
		kv.put(kRAMUsed, max(total-free-cached-buffers, 0))
	}
	if st, ok := kv.get("SwapTotal"); ok && st > 0 {
		sf, _ := kv.get("SwapFree")
		kv.put(kSwapFree, sf)
		kv.put(kSwapUsed, max(st-sf, 0))
	}
	ht, _ := kv.get("HugePages_Total")
	hsz, _ := kv.get(kHugepageSz)
	if ht > 0 && hsz > 0 {
		hf, _ := kv.get("HugePages_Free")
		hr, _ := kv.get("HugePages_Rsvd")
		hs, _ := kv.get("HugePages_Surp")
		kv.put(kHugeFree, hf*hsz)
		kv.put(kHugeUsed, max(ht-hf-hr, 0)*hsz)
		kv.put(kHugeSurp, hs*hsz)
		kv.put(kHugeRsvd, hr*hsz)
	}
}

func newMeminfo(root string) *kvColl {
	c := newKVColl("meminfo", meminfoCharts(), &kvSource{path: root + "/proc/meminfo", parse: parseKeyValue})
	for _, k := range []string{"MemTotal", "Cached", "SwapTotal", "SwapFree", "HugePages_Total", "HugePages_Free",
		"HugePages_Rsvd", "HugePages_Surp", kHugepageSz} {
		c.kv.slot(k)
	}
	c.derive = deriveMeminfo
	return c
}
