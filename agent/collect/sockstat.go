package collect

import "os"

// Socket counts and memory from /proc/net/sockstat and
// /proc/net/sockstat6 (Netdata's proc_net_sockstat and
// proc_net_sockstat6). TCP and UDP memory is counted in pages; the page
// size comes from the kernel once at start. FRAG memory is in bytes.
// Hosts without IPv6 have no sockstat6 and no ipv6.sockstat6_* charts.

func sockstatCharts() []kvChart {
	const m = "/proc/net/sockstat"
	page := int64(os.Getpagesize())
	g := func(id, family, title, units, chartType string, prio int, dims ...kd) kvChart {
		return kvDef(id, id, family, title, units, chartType, m, prio, dims...)
	}
	return []kvChart{
		g("ipv4.sockstat_sockets", "sockets", "IPv4 Sockets Used", "sockets", "line", 5100,
			abs("sockets.used", "used", "", 1, 1)),
		g("ipv4.sockstat_tcp_sockets", "tcp", "IPv4 TCP Sockets", "sockets", "line", 5201,
			abs("TCP.alloc", "alloc", "", 1, 1), abs("TCP.orphan", "orphan", "", 1, 1),
			abs("TCP.inuse", "inuse", "", 1, 1), abs("TCP.tw", "timewait", "", 1, 1)),
		g("ipv4.sockstat_tcp_mem", "tcp", "IPv4 TCP Sockets Memory", "KiB", "area", 5290,
			abs("TCP.mem", "mem", "", page, 1024)),
		g("ipv4.sockstat_udp_sockets", "udp", "IPv4 UDP Sockets", "sockets", "line", 5300,
			abs("UDP.inuse", "inuse", "", 1, 1)),
		g("ipv4.sockstat_udp_mem", "udp", "IPv4 UDP Sockets Memory", "KiB", "area", 5390,
			abs("UDP.mem", "mem", "", page, 1024)),
		g("ipv4.sockstat_udplite_sockets", "udplite", "IPv4 UDPLITE Sockets", "sockets", "line", 5400,
			abs("UDPLITE.inuse", "inuse", "", 1, 1)),
		g("ipv4.sockstat_raw_sockets", "raw", "IPv4 RAW Sockets", "sockets", "line", 5450,
			abs("RAW.inuse", "inuse", "", 1, 1)),
		g("ipv4.sockstat_frag_sockets", "fragments", "IPv4 FRAG Sockets", "fragments", "line", 5460,
			abs("FRAG.inuse", "inuse", "", 1, 1)),
		g("ipv4.sockstat_frag_mem", "fragments", "IPv4 FRAG Sockets Memory", "KiB", "area", 5470,
			abs("FRAG.memory", "mem", "", 1, 1024)),
	}
}

func sockstat6Charts() []kvChart {
	const m = "/proc/net/sockstat6"
	g := func(id, family, title string, prio int, key string) kvChart {
		return kvDef(id, id, family, title, "sockets", "line", m, prio, abs(key, "inuse", "", 1, 1))
	}
	return []kvChart{
		g("ipv6.sockstat6_tcp_sockets", "tcp6", "IPv6 TCP Sockets", 6500, "TCP6.inuse"),
		g("ipv6.sockstat6_udp_sockets", "udp6", "IPv6 UDP Sockets", 6600, "UDP6.inuse"),
		g("ipv6.sockstat6_udplite_sockets", "udplite6", "IPv6 UDPLITE Sockets", 6700, "UDPLITE6.inuse"),
		g("ipv6.sockstat6_raw_sockets", "raw6", "IPv6 RAW Sockets", 6800, "RAW6.inuse"),
		g("ipv6.sockstat6_frag_sockets", "fragments6", "IPv6 FRAG Sockets", 6900, "FRAG6.inuse"),
	}
}

func newSockstat(root string) *kvColl {
	return newKVColl("sockstat", sockstatCharts(), &kvSource{path: root + "/proc/net/sockstat", parse: parseSockstat})
}

func newSockstat6(root string) *kvColl {
	return newKVColl("sockstat6", sockstat6Charts(),
		&kvSource{path: root + "/proc/net/sockstat6", parse: parseSockstat, optional: true})
}
