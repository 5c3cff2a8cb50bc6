package collect

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"peerdns/agent/store"
)

// ifCounters are the 16 /proc/net/dev counters of one interface, in the
// file's order: rx bytes packets errs drop fifo frame compressed
// multicast, tx bytes packets errs drop fifo colls carrier compressed.
type ifCounters struct {
	name string
	v    [16]float64
}

// parseNetDev parses the text of /proc/net/dev into dst (reused; the
// names are copied only when an interface is new at its position).
func parseNetDev(dst []ifCounters, b []byte) ([]ifCounters, error) {
	n := 0
	var arr [20][]byte // a line has 16 counters: no allocation
	fs := arr[:0]
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			continue // the two header lines
		}
		name := bytes.TrimSpace(line[:colon])
		fs = fields(fs[:0], line[colon+1:])
		if len(name) == 0 || len(fs) < 16 {
			return dst[:n], fmt.Errorf("/proc/net/dev: short line %q", line)
		}
		if n == len(dst) {
			dst = append(dst, ifCounters{})
		}
		if dst[n].name != string(name) {
			dst[n].name = string(name)
		}
		for i := range dst[n].v {
			v, ok := parseNum(fs[i])
			if !ok {
				return dst[:n], fmt.Errorf("/proc/net/dev %s: bad number %q", name, fs[i])
			}
			dst[n].v[i] = v
		}
		n++
	}
	if n == 0 {
		return dst[:0], errors.New("/proc/net/dev: no interfaces")
	}
	return dst[:n], nil
}

// netColl stores Netdata's per-interface charts for every interface but
// lo (Netdata's default exclusion): net, net_packets, net_errors,
// net_drops, net_fifo, net_compressed, net_events from /proc/net/dev and
// net_speed, net_duplex, net_operstate, net_carrier, net_mtu from
// /sys/class/net/<iface>/ (a chart whose file the driver does not
// provide, or refuses to read while the link is down, is absent until
// the file reads again, tried every rescanEvery), plus
// system.net, the sum over physical interfaces (those not under
// /sys/devices/virtual/net), or over all of them when the host has no
// physical one (a container's veth), so the chart is never missing.
// Netdata hides an interface's counter charts until they leave zero;
// here an interface has all of them from the start. Charts of an
// interface that disappears are removed; when it returns it gets new
// ones. At most maxInstances interfaces are charted.
type netColl struct {
	root      string
	read      func() ([]byte, error)
	done      func()
	isVirtual func(iface string) bool

	ifs     []ifCounters
	charts  map[string]*ifCharts
	virtual map[string]bool
	seen    map[string]bool
	scanned time.Time
	system  *chart
	raw     [7]float64
	sum     [2]float64
}

type ifCharts struct {
	net, packets, errors, drops, fifo, compressed, events *chart
	speed, duplex, operstate, carrier, mtu                *sysChart
}

// sysChart is a chart of one /sys/class/net file, read through a
// kept-open reader.
type sysChart struct {
	c     *chart
	r     *procReader
	gone  bool      // the last read failed: not read again before retry
	retry time.Time // when a failed file is tried again
}

func newNet(root string) *netColl {
	dev := newProcReader(root + "/proc/net/dev")
	return &netColl{
		root: root,
		read: dev.read,
		done: dev.close,
		isVirtual: func(iface string) bool {
			_, err := os.Stat(root + "/sys/devices/virtual/net/" + iface)
			return err == nil
		},
		charts: map[string]*ifCharts{},
		seen:   map[string]bool{},
	}
}

func (c *netColl) name() string { return "net" }

func (c *netColl) close() {
	if c.done != nil {
		c.done()
	}
	for _, ic := range c.charts {
		ic.closeFiles()
	}
}

func (c *netColl) collect(tk *tick) error {
	b, err := c.read()
	if err != nil {
		return fmt.Errorf("read /proc/net/dev: %w", err)
	}
	c.ifs, err = parseNetDev(c.ifs, b)
	if err != nil {
		return err
	}
	if c.virtual == nil || tk.now.Sub(c.scanned) >= rescanEvery {
		c.virtual, c.scanned = map[string]bool{}, tk.now
	}
	if c.system == nil {
		c.system = newChart(&store.ChartDef{
			ID: "system.net", Context: "system.net", Family: "network",
			Title: "Physical Network Interfaces Aggregated Bandwidth", Units: "kilobits/s", ChartType: "area",
			Plugin: "proc.plugin", Module: "/proc/net/dev", Priority: 500, UpdateEvery: 1,
			// As Netdata declares them; the values put are the summed rates.
			Dims: []store.DimDef{dim("InOctets", "received", algIncremental, 8, 1000), dim("OutOctets", "sent", algIncremental, -8, 1000)},
		})
	}
	var phys, all [2]float64
	nphys, nall := 0, 0
	physical := false // a physical interface is charted, rated or not
	clear(c.seen)
	for i := range c.ifs {
		s := &c.ifs[i]
		if s.name == "lo" {
			continue
		}
		ic := c.charts[s.name]
		if ic == nil {
			if len(c.charts) >= maxInstances {
				tk.capped("net", "interfaces")
				continue
			}
			ic = newIfCharts(c.root, s.name)
			c.charts[s.name] = ic
		}
		c.seen[s.name] = true
		virt, known := c.virtual[s.name]
		if !known {
			virt = c.isVirtual(s.name)
			c.virtual[s.name] = virt
		}
		physical = physical || !virt
		v := &s.v
		c.raw[0], c.raw[1] = v[0], v[8]
		tk.collected(ic.net.def.ID, c.raw[:2])
		if out, ok := ic.net.convert(tk.now, c.raw[:2]); ok {
			tk.put(ic.net.def, out)
			if out[0] == out[0] && out[1] == out[1] {
				all[0], all[1] = all[0]+out[0], all[1]+out[1]
				nall++
				if !virt {
					phys[0], phys[1] = phys[0]+out[0], phys[1]+out[1]
					nphys++
				}
			}
		}
		c.raw[0], c.raw[1], c.raw[2] = v[1], v[9], v[7]
		ic.packets.emit(tk, c.raw[:3])
		c.raw[0], c.raw[1] = v[2], v[10]
		ic.errors.emit(tk, c.raw[:2])
		c.raw[0], c.raw[1] = v[3], v[11]
		ic.drops.emit(tk, c.raw[:2])
		c.raw[0], c.raw[1] = v[4], v[12]
		ic.fifo.emit(tk, c.raw[:2])
		c.raw[0], c.raw[1] = v[6], v[15]
		ic.compressed.emit(tk, c.raw[:2])
		c.raw[0], c.raw[1], c.raw[2] = v[5], v[13], v[14]
		ic.events.emit(tk, c.raw[:3])
		c.sysfs(tk, ic)
	}
	for name, ic := range c.charts {
		if !c.seen[name] { // the interface went away
			ic.remove(tk)
			delete(c.charts, name)
		}
	}
	// A physical interface without a rate this second (new, or its
	// counters went back) leaves a gap: the virtual ones are not its
	// stand-in.
	switch {
	case nphys > 0:
		c.sum = phys
	case nall > 0 && !physical:
		c.sum = all
	default:
		return nil
	}
	tk.put(c.system.def, c.sum[:])
	return nil
}

// operstates are Netdata's net.operstate dimensions, in its order.
var operstates = [...]string{"up", "down", "notpresent", "lowerlayerdown", "testing", "dormant", "unknown"}

// sysfs reads the interface's /sys/class/net files and stores their charts.
func (c *netColl) sysfs(tk *tick, ic *ifCharts) {
	if b, ok := ic.speed.value(tk.now); ok {
		if v, ok := parseNum(bytes.TrimSpace(b)); ok {
			c.raw[0] = max(v, 0) * 1000 // Mbit/s; -1 = unknown
			ic.speed.c.emit(tk, c.raw[:1])
		}
	}
	if b, ok := ic.duplex.value(tk.now); ok {
		b = bytes.TrimSpace(b)
		c.raw[0], c.raw[1], c.raw[2] = 0, 0, 0
		switch string(b) {
		case "full":
			c.raw[0] = 1
		case "half":
			c.raw[1] = 1
		default:
			c.raw[2] = 1
		}
		ic.duplex.c.emit(tk, c.raw[:3])
	}
	if b, ok := ic.operstate.value(tk.now); ok {
		b = bytes.TrimSpace(b)
		hit := false
		for i, s := range operstates {
			c.raw[i] = 0
			if string(b) == s {
				c.raw[i], hit = 1, true
			}
		}
		if !hit {
			c.raw[6] = 1
		}
		ic.operstate.c.emit(tk, c.raw[:7])
	}
	if b, ok := ic.carrier.value(tk.now); ok {
		if v, ok := parseNum(bytes.TrimSpace(b)); ok {
			c.raw[0], c.raw[1] = 0, 0
			if v == 1 {
				c.raw[0] = 1
			} else {
				c.raw[1] = 1
			}
			ic.carrier.c.emit(tk, c.raw[:2])
		}
	}
	if b, ok := ic.mtu.value(tk.now); ok {
		if v, ok := parseNum(bytes.TrimSpace(b)); ok {
			c.raw[0] = v
			ic.mtu.c.emit(tk, c.raw[:1])
		}
	}
}

// value reads the file; a file that fails is tried again only every
// rescanEvery (drivers that refuse speed, duplex or carrier on a down
// link answer EINVAL until the link comes up).
func (s *sysChart) value(now time.Time) ([]byte, bool) {
	if s.gone && now.Before(s.retry) {
		return nil, false
	}
	b, err := s.r.read()
	if err != nil {
		s.gone, s.retry = true, now.Add(rescanEvery)
		s.r.close()
		return nil, false
	}
	s.gone = false
	return b, true
}

func (ic *ifCharts) closeFiles() {
	for _, s := range []*sysChart{ic.speed, ic.duplex, ic.operstate, ic.carrier, ic.mtu} {
		s.r.close()
	}
}

func (ic *ifCharts) remove(tk *tick) {
	ic.closeFiles()
	for _, c := range []*chart{ic.net, ic.packets, ic.errors, ic.drops, ic.fifo, ic.compressed, ic.events,
		ic.speed.c, ic.duplex.c, ic.operstate.c, ic.carrier.c, ic.mtu.c} {
		tk.remove(c.def)
	}
}

func newIfCharts(root, iface string) *ifCharts {
	mk := func(typ, context, title, units, chartType string, prio int, dims ...store.DimDef) *chart {
		return newChart(&store.ChartDef{
			ID: typ + "." + iface, Context: context, Family: iface, Title: title, Units: units,
			ChartType: chartType, Plugin: "proc.plugin", Module: "/proc/net/dev", Priority: prio, UpdateEvery: 1, Dims: dims,
		})
	}
	in := func(id string) store.DimDef { return dim(id, "", algIncremental, 1, 1) }
	out := func(id string) store.DimDef { return dim(id, "", algIncremental, -1, 1) }
	ab := func(id string) store.DimDef { return dim(id, "", algAbsolute, 1, 1) }
	sys := func(file string, c *chart) *sysChart {
		return &sysChart{c: c, r: newProcReader(root + "/sys/class/net/" + iface + "/" + file)}
	}
	var opDims []store.DimDef
	for _, s := range operstates {
		opDims = append(opDims, ab(s))
	}
	return &ifCharts{
		net: mk("net", "net.net", "Bandwidth", "kilobits/s", "area", 7000,
			dim("received", "", algIncremental, 8, 1000), dim("sent", "", algIncremental, -8, 1000)),
		packets: mk("net_packets", "net.packets", "Packets", "packets/s", "line", 7001,
			in("received"), out("sent"), in("multicast")),
		errors:     mk("net_errors", "net.errors", "Interface Errors", "errors/s", "line", 7002, in("inbound"), out("outbound")),
		drops:      mk("net_drops", "net.drops", "Interface Drops", "drops/s", "line", 7003, in("inbound"), out("outbound")),
		fifo:       mk("net_fifo", "net.fifo", "Interface FIFO Buffer Errors", "errors", "line", 7004, in("receive"), out("transmit")),
		compressed: mk("net_compressed", "net.compressed", "Compressed Packets", "packets/s", "line", 7005, in("received"), out("sent")),
		events: mk("net_events", "net.events", "Network Interface Events", "events/s", "line", 7006,
			in("frames"), out("collisions"), out("carrier")),
		speed:     sys("speed", mk("net_speed", "net.speed", "Interface Speed", "kilobits/s", "line", 7007, ab("speed"))),
		duplex:    sys("duplex", mk("net_duplex", "net.duplex", "Interface Duplex State", "state", "line", 7008, ab("full"), ab("half"), ab("unknown"))),
		operstate: sys("operstate", mk("net_operstate", "net.operstate", "Interface Operational State", "state", "line", 7009, opDims...)),
		carrier:   sys("carrier", mk("net_carrier", "net.carrier", "Interface Physical Link State", "state", "line", 7010, ab("up"), ab("down"))),
		mtu:       sys("mtu", mk("net_mtu", "net.mtu", "Interface MTU", "octets", "line", 7011, ab("mtu"))),
	}
}
