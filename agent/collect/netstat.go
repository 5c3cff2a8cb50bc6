package collect

// The IPv4/IPv6/TCP/UDP/ICMP stack: /proc/net/snmp, /proc/net/netstat and
// /proc/net/snmp6, read once a second each. Netdata 1.37 charts all three
// under the module name "/proc/net/netstat"; so does this collector. The
// charts are Netdata's (ids, contexts, families, titles, units, priorities,
// dimension ids and names, multipliers), with one difference: Netdata
// hides a chart until one of its counters leaves zero (its "auto" mode),
// this collector shows every chart whose counters the kernel has, so the
// catalog does not change under the dashboard. Hosts without IPv6 have no
// /proc/net/snmp6: the ipv6.* charts are then absent.

const netstatModule = "/proc/net/netstat"

// ns is a /proc/net/netstat-module chart with Netdata's fields.
func ns(id, family, title, units, chartType string, prio int, dims ...kd) kvChart {
	return kvDef(id, id, family, title, units, chartType, netstatModule, prio, dims...)
}

// rx/tx are a received/sent pair of counters: sent drawn below zero.
func rx(key, id, name string) kd { return inc(key, id, name, 1, 1) }
func tx(key, id, name string) kd { return inc(key, id, name, -1, 1) }

// kbits are octet counters shown in kilobits/s.
func kbitsIn(key, id, name string) kd  { return inc(key, id, name, 8, 1000) }
func kbitsOut(key, id, name string) kd { return inc(key, id, name, -8, 1000) }

// e is an event counter drawn above zero under its key's last part.
func e(key, id, name string) kd { return inc(key, id, name, 1, 1) }

func netstatCharts() []kvChart {
	return []kvChart{
		// /proc/net/netstat IpExt and TcpExt
		ns("system.ip", "network", "IP Bandwidth", "kilobits/s", "area", 501,
			kbitsIn("IpExt.InOctets", "InOctets", "received"), kbitsOut("IpExt.OutOctets", "OutOctets", "sent")),
		ns("ip.inerrors", "errors", "IP Input Errors", "packets/s", "line", 4000,
			e("IpExt.InNoRoutes", "InNoRoutes", "noroutes"), e("IpExt.InTruncatedPkts", "InTruncatedPkts", "truncated"),
			e("IpExt.InCsumErrors", "InCsumErrors", "checksum")),
		ns("ip.mcast", "multicast", "IP Multicast Bandwidth", "kilobits/s", "area", 4600,
			kbitsIn("IpExt.InMcastOctets", "InMcastOctets", "received"), kbitsOut("IpExt.OutMcastOctets", "OutMcastOctets", "sent")),
		ns("ip.bcast", "broadcast", "IP Broadcast Bandwidth", "kilobits/s", "area", 4500,
			kbitsIn("IpExt.InBcastOctets", "InBcastOctets", "received"), kbitsOut("IpExt.OutBcastOctets", "OutBcastOctets", "sent")),
		ns("ip.mcastpkts", "multicast", "IP Multicast Packets", "packets/s", "line", 4610,
			rx("IpExt.InMcastPkts", "InMcastPkts", "received"), tx("IpExt.OutMcastPkts", "OutMcastPkts", "sent")),
		ns("ip.bcastpkts", "broadcast", "IP Broadcast Packets", "packets/s", "line", 4510,
			rx("IpExt.InBcastPkts", "InBcastPkts", "received"), tx("IpExt.OutBcastPkts", "OutBcastPkts", "sent")),
		ns("ip.ecnpkts", "ecn", "IP ECN Statistics", "packets/s", "line", 4700,
			e("IpExt.InCEPkts", "InCEPkts", "CEP"), e("IpExt.InNoECTPkts", "InNoECTPkts", "NoECTP"),
			e("IpExt.InECT0Pkts", "InECT0Pkts", "ECTP0"), e("IpExt.InECT1Pkts", "InECT1Pkts", "ECTP1")),
		ns("ip.tcpmemorypressures", "tcp", "TCP Memory Pressures", "events/s", "line", 4290,
			e("TcpExt.TCPMemoryPressures", "TCPMemoryPressures", "pressures")),
		ns("ip.tcpconnaborts", "tcp", "TCP Connection Aborts", "connections/s", "line", 4210,
			e("TcpExt.TCPAbortOnData", "TCPAbortOnData", "baddata"), e("TcpExt.TCPAbortOnClose", "TCPAbortOnClose", "userclosed"),
			e("TcpExt.TCPAbortOnMemory", "TCPAbortOnMemory", "nomemory"), e("TcpExt.TCPAbortOnTimeout", "TCPAbortOnTimeout", "timeout"),
			e("TcpExt.TCPAbortOnLinger", "TCPAbortOnLinger", "linger"), e("TcpExt.TCPAbortFailed", "TCPAbortFailed", "failed")),
		ns("ip.tcpreorders", "tcp", "TCP Reordered Packets by Detection Method", "packets/s", "line", 4220,
			e("TcpExt.TCPTSReorder", "TCPTSReorder", "timestamp"), e("TcpExt.TCPSACKReorder", "TCPSACKReorder", "sack"),
			e("TcpExt.TCPFACKReorder", "TCPFACKReorder", "fack"), e("TcpExt.TCPRenoReorder", "TCPRenoReorder", "reno")),
		ns("ip.tcpofo", "tcp", "TCP Out-Of-Order Queue", "packets/s", "line", 4250,
			e("TcpExt.TCPOFOQueue", "TCPOFOQueue", "inqueue"), tx("TcpExt.TCPOFODrop", "TCPOFODrop", "dropped"),
			e("TcpExt.TCPOFOMerge", "TCPOFOMerge", "merged"), tx("TcpExt.OfoPruned", "OfoPruned", "pruned")),
		ns("ip.tcpsyncookies", "tcp", "TCP SYN Cookies", "packets/s", "line", 4260,
			rx("TcpExt.SyncookiesRecv", "SyncookiesRecv", "received"), tx("TcpExt.SyncookiesSent", "SyncookiesSent", "sent"),
			tx("TcpExt.SyncookiesFailed", "SyncookiesFailed", "failed")),
		ns("ip.tcp_syn_queue", "tcp", "TCP SYN Queue Issues", "packets/s", "line", 4215,
			e("TcpExt.TCPReqQFullDrop", "TCPReqQFullDrop", "drops"), e("TcpExt.TCPReqQFullDoCookies", "TCPReqQFullDoCookies", "cookies")),
		ns("ip.tcp_accept_queue", "tcp", "TCP Accept Queue Issues", "packets/s", "line", 4216,
			e("TcpExt.ListenOverflows", "ListenOverflows", "overflows"), e("TcpExt.ListenDrops", "ListenDrops", "drops")),

		// /proc/net/snmp
		ns("ipv4.packets", "packets", "IPv4 Packets", "packets/s", "line", 5130,
			rx("Ip.InReceives", "InReceives", "received"), tx("Ip.OutRequests", "OutRequests", "sent"),
			e("Ip.ForwDatagrams", "ForwDatagrams", "forwarded"), e("Ip.InDelivers", "InDelivers", "delivered")),
		ns("ipv4.fragsout", "fragments", "IPv4 Fragments Sent", "packets/s", "line", 5460,
			e("Ip.FragOKs", "FragOKs", "ok"), tx("Ip.FragFails", "FragFails", "failed"), e("Ip.FragCreates", "FragCreates", "created")),
		ns("ipv4.fragsin", "fragments", "IPv4 Fragments Reassembly", "packets/s", "line", 5461,
			e("Ip.ReasmOKs", "ReasmOKs", "ok"), tx("Ip.ReasmFails", "ReasmFails", "failed"), e("Ip.ReasmReqds", "ReasmReqds", "all")),
		ns("ipv4.errors", "errors", "IPv4 Errors", "packets/s", "line", 5150,
			e("Ip.InDiscards", "InDiscards", ""), tx("Ip.OutDiscards", "OutDiscards", ""),
			e("Ip.InHdrErrors", "InHdrErrors", ""), tx("Ip.OutNoRoutes", "OutNoRoutes", ""),
			e("Ip.InAddrErrors", "InAddrErrors", ""), e("Ip.InUnknownProtos", "InUnknownProtos", "")),
		ns("ipv4.icmp", "icmp", "IPv4 ICMP Packets", "packets/s", "line", 5170,
			rx("Icmp.InMsgs", "InMsgs", "received"), tx("Icmp.OutMsgs", "OutMsgs", "sent")),
		ns("ipv4.icmp_errors", "icmp", "IPv4 ICMP Errors", "packets/s", "line", 5171,
			e("Icmp.InErrors", "InErrors", ""), tx("Icmp.OutErrors", "OutErrors", ""), e("Icmp.InCsumErrors", "InCsumErrors", "")),
		icmpMsgChart(),
		ns("ipv4.tcpsock", "tcp", "IPv4 TCP Connections", "active connections", "line", 5200,
			abs("Tcp.CurrEstab", "CurrEstab", "connections", 1, 1)),
		ns("ipv4.tcppackets", "tcp", "IPv4 TCP Packets", "packets/s", "line", 5204,
			rx("Tcp.InSegs", "InSegs", "received"), tx("Tcp.OutSegs", "OutSegs", "sent")),
		ns("ipv4.tcperrors", "tcp", "IPv4 TCP Errors", "packets/s", "line", 5220,
			e("Tcp.InErrs", "InErrs", ""), e("Tcp.InCsumErrors", "InCsumErrors", ""), tx("Tcp.RetransSegs", "RetransSegs", "")),
		ns("ipv4.tcpopens", "tcp", "IPv4 TCP Opens", "connections/s", "line", 5205,
			e("Tcp.ActiveOpens", "ActiveOpens", "active"), e("Tcp.PassiveOpens", "PassiveOpens", "passive")),
		ns("ipv4.tcphandshake", "tcp", "IPv4 TCP Handshake Issues", "events/s", "line", 5230,
			e("Tcp.EstabResets", "EstabResets", ""), e("Tcp.OutRsts", "OutRsts", ""),
			e("Tcp.AttemptFails", "AttemptFails", ""), e("TcpExt.TCPSynRetrans", "TCPSynRetrans", "SynRetrans")),
		ns("ipv4.udppackets", "udp", "IPv4 UDP Packets", "packets/s", "line", 5300,
			rx("Udp.InDatagrams", "InDatagrams", "received"), tx("Udp.OutDatagrams", "OutDatagrams", "sent")),
		ns("ipv4.udperrors", "udp", "IPv4 UDP Errors", "events/s", "line", 5310, udpErrors("Udp.")...),
		ns("ipv4.udplite", "udplite", "IPv4 UDPLite Packets", "packets/s", "line", 5400,
			rx("UdpLite.InDatagrams", "InDatagrams", "received"), tx("UdpLite.OutDatagrams", "OutDatagrams", "sent")),
		ns("ipv4.udplite_errors", "udplite", "IPv4 UDPLite Errors", "packets/s", "line", 5410, udpErrors("UdpLite.")...),

		// /proc/net/snmp6
		ns("system.ipv6", "network", "IPv6 Bandwidth", "kilobits/s", "area", 502,
			kbitsIn("6.Ip6InOctets", "InOctets", "received"), kbitsOut("6.Ip6OutOctets", "OutOctets", "sent")),
		ns("ipv6.packets", "packets", "IPv6 Packets", "packets/s", "line", 6200,
			rx("6.Ip6InReceives", "InReceives", "received"), tx("6.Ip6OutRequests", "OutRequests", "sent"),
			tx("6.Ip6OutForwDatagrams", "OutForwDatagrams", "forwarded"), e("6.Ip6InDelivers", "InDelivers", "delivers")),
		ns("ipv6.fragsout", "fragments6", "IPv6 Fragments Sent", "packets/s", "line", 6400,
			e("6.Ip6FragOKs", "FragOKs", "ok"), tx("6.Ip6FragFails", "FragFails", "failed"), e("6.Ip6FragCreates", "FragCreates", "all")),
		ns("ipv6.fragsin", "fragments6", "IPv6 Fragments Reassembly", "packets/s", "line", 6401,
			e("6.Ip6ReasmOKs", "ReasmOKs", "ok"), tx("6.Ip6ReasmFails", "ReasmFails", "failed"),
			tx("6.Ip6ReasmTimeout", "ReasmTimeout", "timeout"), e("6.Ip6ReasmReqds", "ReasmReqds", "all")),
		ns("ipv6.errors", "errors", "IPv6 Errors", "packets/s", "line", 6300,
			e("6.Ip6InDiscards", "InDiscards", ""), tx("6.Ip6OutDiscards", "OutDiscards", ""),
			e("6.Ip6InHdrErrors", "InHdrErrors", ""), e("6.Ip6InAddrErrors", "InAddrErrors", ""),
			e("6.Ip6InUnknownProtos", "InUnknownProtos", ""), e("6.Ip6InTooBigErrors", "InTooBigErrors", ""),
			e("6.Ip6InTruncatedPkts", "InTruncatedPkts", ""), e("6.Ip6InNoRoutes", "InNoRoutes", ""),
			tx("6.Ip6OutNoRoutes", "OutNoRoutes", "")),
		ns("ipv6.udppackets", "udp6", "IPv6 UDP Packets", "packets/s", "line", 6601,
			rx("6.Udp6InDatagrams", "InDatagrams", "received"), tx("6.Udp6OutDatagrams", "OutDatagrams", "sent")),
		ns("ipv6.udperrors", "udp6", "IPv6 UDP Errors", "events/s", "line", 6610, udpErrors("6.Udp6")...),
		ns("ipv6.udplitepackets", "udplite6", "IPv6 UDPlite Packets", "packets/s", "line", 6701,
			rx("6.UdpLite6InDatagrams", "InDatagrams", "received"), tx("6.UdpLite6OutDatagrams", "OutDatagrams", "sent")),
		ns("ipv6.udpliteerrors", "udplite6", "IPv6 UDP Lite Errors", "events/s", "line", 6710, udpErrors("6.UdpLite6")[:5]...),
		ns("ipv6.mcast", "multicast6", "IPv6 Multicast Bandwidth", "kilobits/s", "area", 6850,
			kbitsIn("6.Ip6InMcastOctets", "InMcastOctets", "received"), kbitsOut("6.Ip6OutMcastOctets", "OutMcastOctets", "sent")),
		ns("ipv6.bcast", "broadcast6", "IPv6 Broadcast Bandwidth", "kilobits/s", "area", 6840,
			kbitsIn("6.Ip6InBcastOctets", "InBcastOctets", "received"), kbitsOut("6.Ip6OutBcastOctets", "OutBcastOctets", "sent")),
		ns("ipv6.mcastpkts", "multicast6", "IPv6 Multicast Packets", "packets/s", "line", 6851,
			rx("6.Ip6InMcastPkts", "InMcastPkts", "received"), tx("6.Ip6OutMcastPkts", "OutMcastPkts", "sent")),
		ns("ipv6.icmp", "icmp6", "IPv6 ICMP Messages", "messages/s", "line", 6900,
			rx("6.Icmp6InMsgs", "InMsgs", "received"), tx("6.Icmp6OutMsgs", "OutMsgs", "sent")),
		ns("ipv6.icmpredir", "icmp6", "IPv6 ICMP Redirects", "redirects/s", "line", 6910,
			rx("6.Icmp6InRedirects", "InRedirects", "received"), tx("6.Icmp6OutRedirects", "OutRedirects", "sent")),
		ns("ipv6.icmperrors", "icmp6", "IPv6 ICMP Errors", "errors/s", "line", 6920,
			e("6.Icmp6InErrors", "InErrors", ""), tx("6.Icmp6OutErrors", "OutErrors", ""),
			e("6.Icmp6InCsumErrors", "InCsumErrors", ""), e("6.Icmp6InDestUnreachs", "InDestUnreachs", ""),
			e("6.Icmp6InPktTooBigs", "InPktTooBigs", ""), e("6.Icmp6InTimeExcds", "InTimeExcds", ""),
			e("6.Icmp6InParmProblems", "InParmProblems", ""), tx("6.Icmp6OutDestUnreachs", "OutDestUnreachs", ""),
			tx("6.Icmp6OutPktTooBigs", "OutPktTooBigs", ""), tx("6.Icmp6OutTimeExcds", "OutTimeExcds", ""),
			tx("6.Icmp6OutParmProblems", "OutParmProblems", "")),
		ns("ipv6.icmpechos", "icmp6", "IPv6 ICMP Echo", "messages/s", "line", 6930,
			e("6.Icmp6InEchos", "InEchos", ""), tx("6.Icmp6OutEchos", "OutEchos", ""),
			e("6.Icmp6InEchoReplies", "InEchoReplies", ""), tx("6.Icmp6OutEchoReplies", "OutEchoReplies", "")),
		ns("ipv6.groupmemb", "icmp6", "IPv6 ICMP Group Membership", "messages/s", "line", 6940,
			e("6.Icmp6InGroupMembQueries", "InQueries", ""), tx("6.Icmp6OutGroupMembQueries", "OutQueries", ""),
			e("6.Icmp6InGroupMembResponses", "InResponses", ""), tx("6.Icmp6OutGroupMembResponses", "OutResponses", ""),
			e("6.Icmp6InGroupMembReductions", "InReductions", ""), tx("6.Icmp6OutGroupMembReductions", "OutReductions", "")),
		ns("ipv6.icmprouter", "icmp6", "IPv6 Router Messages", "messages/s", "line", 6950,
			e("6.Icmp6InRouterSolicits", "InSolicits", ""), tx("6.Icmp6OutRouterSolicits", "OutSolicits", ""),
			e("6.Icmp6InRouterAdvertisements", "InAdvertisements", ""), tx("6.Icmp6OutRouterAdvertisements", "OutAdvertisements", "")),
		ns("ipv6.icmpneighbor", "icmp6", "IPv6 Neighbor Messages", "messages/s", "line", 6960,
			e("6.Icmp6InNeighborSolicits", "InSolicits", ""), tx("6.Icmp6OutNeighborSolicits", "OutSolicits", ""),
			e("6.Icmp6InNeighborAdvertisements", "InAdvertisements", ""), tx("6.Icmp6OutNeighborAdvertisements", "OutAdvertisements", "")),
		ns("ipv6.icmpmldv2", "icmp6", "IPv6 ICMP MLDv2 Reports", "reports/s", "line", 6970,
			rx("6.Icmp6InMLDv2Reports", "InMLDv2Reports", "received"), tx("6.Icmp6OutMLDv2Reports", "OutMLDv2Reports", "sent")),
		icmp6TypesChart(),
		ns("ipv6.ect", "packets", "IPv6 ECT Packets", "packets/s", "line", 6210,
			e("6.Ip6InNoECTPkts", "InNoECTPkts", ""), e("6.Ip6InECT1Pkts", "InECT1Pkts", ""),
			e("6.Ip6InECT0Pkts", "InECT0Pkts", ""), e("6.Ip6InCEPkts", "InCEPkts", "")),
	}
}

func udpErrors(p string) []kd {
	return []kd{
		e(p+"RcvbufErrors", "RcvbufErrors", ""), tx(p+"SndbufErrors", "SndbufErrors", ""),
		e(p+"InErrors", "InErrors", ""), e(p+"NoPorts", "NoPorts", ""),
		e(p+"InCsumErrors", "InCsumErrors", ""), e(p+"IgnoredMulti", "IgnoredMulti", ""),
	}
}

// icmpMsgChart is ipv4.icmpmsg: the IcmpMsg line has a column per ICMP
// type seen since boot; Netdata charts these twenty, a type the kernel has
// not printed yet counting 0.
func icmpMsgChart() kvChart {
	types := []struct {
		n    string
		name string
	}{
		{"0", "EchoReps"}, {"3", "DestUnreachs"}, {"5", "Redirects"}, {"8", "Echos"}, {"9", "RouterAdvert"},
		{"10", "RouterSelect"}, {"11", "TimeExcds"}, {"12", "ParmProbs"}, {"13", "Timestamps"}, {"14", "TimestampReps"},
	}
	var dims []kd
	for _, t := range types {
		dims = append(dims, e("IcmpMsg.InType"+t.n, "InType"+t.n, "In"+t.name), tx("IcmpMsg.OutType"+t.n, "OutType"+t.n, "Out"+t.name))
	}
	c := ns("ipv4.icmpmsg", "icmp", "IPv4 ICMP Messages", "packets/s", "line", 5172, dims...)
	c.always = true
	return c
}

// icmp6TypesChart is ipv6.icmptypes, the Icmp6InType/OutType counters
// (the kernel prints only types seen since boot; the others count 0). The
// list is the one Netdata shows on the reference host.
func icmp6TypesChart() kvChart {
	var dims []kd
	for _, t := range []string{"1", "128", "129", "136"} {
		dims = append(dims, e("6.Icmp6InType"+t, "InType"+t, ""))
	}
	for _, t := range []string{"1", "128", "129", "133", "135", "143"} {
		dims = append(dims, tx("6.Icmp6OutType"+t, "OutType"+t, ""))
	}
	c := ns("ipv6.icmptypes", "icmp6", "IPv6 ICMP Types", "messages/s", "line", 6980, dims...)
	c.always = true
	return c
}

// newNetstat reads the three files; snmp6 is optional (no IPv6).
func newNetstat(root string) *kvColl {
	return newKVColl("netstat", netstatCharts(),
		&kvSource{path: root + "/proc/net/snmp", parse: parseHeaderPairs},
		&kvSource{path: root + "/proc/net/netstat", parse: parseHeaderPairs},
		&kvSource{path: root + "/proc/net/snmp6", prefix: "6.", parse: parseKeyValue, optional: true},
	)
}
