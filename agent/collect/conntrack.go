package collect

// Connection tracking from /proc/net/stat/nf_conntrack (Netdata's
// proc_net_stat_conntrack): a header of column names and a line of
// hexadecimal counters per CPU, summed here; "entries" is the table size,
// the same on every line. Kernels 5.x dropped the searched, delete and
// delete_list columns: those dimensions stay, at 0, as in Netdata. Hosts
// without the nf_conntrack module have no file and no charts.

func conntrackCharts() []kvChart {
	const m = "/proc/net/stat/nf_conntrack"
	g := func(id, title, units string, prio int, dims ...kd) kvChart {
		c := kvDef(id, id, "conntrack", title, units, "line", m, prio, dims...)
		c.always = true
		return c
	}
	return []kvChart{
		g("netfilter.conntrack_sockets", "Connection Tracker Connections", "active connections", 8700,
			abs("ct.entries", "connections", "", 1, 1)),
		g("netfilter.conntrack_new", "Connection Tracker New Connections", "connections/s", 8701,
			inc("ct.new", "new", "", 1, 1), inc("ct.ignore", "ignore", "", -1, 1), inc("ct.invalid", "invalid", "", -1, 1)),
		g("netfilter.conntrack_changes", "Connection Tracker Changes", "changes/s", 8702,
			inc("ct.insert", "inserted", "", 1, 1), inc("ct.delete", "deleted", "", -1, 1), inc("ct.delete_list", "delete_list", "", -1, 1)),
		g("netfilter.conntrack_expect", "Connection Tracker Expectations", "expectations/s", 8703,
			inc("ct.expect_create", "created", "", 1, 1), inc("ct.expect_delete", "deleted", "", -1, 1), inc("ct.expect_new", "new", "", 1, 1)),
		g("netfilter.conntrack_errors", "Connection Tracker Errors", "events/s", 8705,
			inc("ct.icmp_error", "icmp_error", "", 1, 1), inc("ct.insert_failed", "insert_failed", "", -1, 1),
			inc("ct.drop", "drop", "", -1, 1), inc("ct.early_drop", "early_drop", "", -1, 1)),
		g("netfilter.conntrack_search", "Connection Tracker Searches", "searches/s", 8710,
			inc("ct.searched", "searched", "", 1, 1), inc("ct.search_restart", "restarted", "", -1, 1), inc("ct.found", "found", "", 1, 1)),
	}
}

// parseConntrack sums the per-CPU lines under "ct."+column (entries is
// taken from the first line, not summed).
func parseConntrack(b []byte, prefix string, kv *kvValues) error {
	header, b := nextLine(b)
	var names [32][]byte
	nn := 0
	rest := header
	for nn < len(names) {
		var f []byte
		f, rest = firstField(rest)
		if len(f) == 0 {
			break
		}
		names[nn] = f
		nn++
	}
	if nn == 0 {
		return errNoValues
	}
	var scratch [48]byte
	rows := 0
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		var vals [32]float64
		n := 0
		ok := true
		rest := line
		for n < nn {
			var f []byte
			f, rest = firstField(rest)
			if len(f) == 0 {
				break
			}
			v, good := parseHex(f)
			if !good {
				ok = false
				break
			}
			vals[n] = v
			n++
		}
		if !ok || n != nn {
			continue
		}
		for i := 0; i < nn; i++ {
			k := append(append(append(scratch[:0], prefix...), "ct."...), names[i]...)
			if rows == 0 {
				kv.set("", k, vals[i])
			} else if string(names[i]) != "entries" {
				kv.add(k, vals[i])
			}
		}
		rows++
	}
	if rows == 0 {
		return errNoValues
	}
	return nil
}

func newConntrack(root string) *kvColl {
	return newKVColl("conntrack", conntrackCharts(),
		&kvSource{path: root + "/proc/net/stat/nf_conntrack", parse: parseConntrack, optional: true})
}
