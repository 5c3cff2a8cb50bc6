package collect

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"peerdns/agent/store"
)

// ifCounters are the /proc/net/dev counters of one interface that the
// charts use. gopsutil's net.IOCounters has no multicast column, which
// net_packets needs, so this collector reads the file itself.
type ifCounters struct {
	name                        string
	rxBytes, rxPackets, rxMulti uint64
	txBytes, txPackets          uint64
}

// parseNetDev parses the text of /proc/net/dev into dst (reused).
func parseNetDev(dst []ifCounters, b []byte) ([]ifCounters, error) {
	dst = dst[:0]
	var fs [][]byte
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			continue // the two header lines
		}
		name := bytes.TrimSpace(line[:colon])
		fs = fields(fs[:0], line[colon+1:])
		if len(name) == 0 || len(fs) < 10 {
			return dst, fmt.Errorf("/proc/net/dev: short line %q", line)
		}
		var v [10]uint64
		for i := range v {
			n, err := parseUint(fs[i])
			if err != nil {
				return dst, fmt.Errorf("/proc/net/dev %s: %w", name, err)
			}
			v[i] = n
		}
		dst = append(dst, ifCounters{
			name: string(name), rxBytes: v[0], rxPackets: v[1], rxMulti: v[7], txBytes: v[8], txPackets: v[9],
		})
	}
	if len(dst) == 0 {
		return dst, errors.New("/proc/net/dev: no interfaces")
	}
	return dst, nil
}

// netColl stores net.<iface> (kilobits/s), net_packets.<iface> (packets/s)
// for every interface but lo that has moved any bytes (Netdata's "auto"),
// and system.net, the sum over physical interfaces (those not under
// /sys/devices/virtual/net), or over all of them when the host has no
// physical one (a container's veth), so the chart is never missing.
type netColl struct {
	read      func() ([]byte, error)
	done      func()
	isVirtual func(iface string) bool

	ifs     []ifCounters
	charts  map[string]*ifCharts
	virtual map[string]bool
	scanned time.Time
	system  *chart
	raw     [3]float64
	sum     [2]float64
}

type ifCharts struct{ net, packets *chart }

func newNet() *netColl {
	dev := newProcReader("/proc/net/dev")
	return &netColl{
		read: dev.read,
		done: dev.close,
		isVirtual: func(iface string) bool {
			_, err := os.Stat("/sys/devices/virtual/net/" + iface)
			return err == nil
		},
		charts: map[string]*ifCharts{},
	}
}

func (c *netColl) name() string { return "net" }

func (c *netColl) close() {
	if c.done != nil {
		c.done()
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
	sort.Slice(c.ifs, func(i, j int) bool { return c.ifs[i].name < c.ifs[j].name })
	var phys, all [2]float64
	nphys, nall := 0, 0
	for _, s := range c.ifs {
		if s.name == "lo" {
			continue
		}
		ic := c.charts[s.name]
		if ic == nil {
			if s.rxBytes == 0 && s.txBytes == 0 {
				continue // never used: no chart, as Netdata's auto mode
			}
			ic = newIfCharts(s.name)
			c.charts[s.name] = ic
		}
		virt, known := c.virtual[s.name]
		if !known {
			virt = c.isVirtual(s.name)
			c.virtual[s.name] = virt
		}
		c.raw = [3]float64{float64(s.rxBytes), float64(s.txBytes)}
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
		c.raw = [3]float64{float64(s.rxPackets), float64(s.txPackets), float64(s.rxMulti)}
		ic.packets.emit(tk, c.raw[:])
	}
	switch {
	case nphys > 0:
		c.sum = phys
	case nall > 0:
		c.sum = all
	default:
		return nil
	}
	tk.put(c.system.def, c.sum[:])
	return nil
}

func newIfCharts(iface string) *ifCharts {
	return &ifCharts{
		net: newChart(&store.ChartDef{
			ID: "net." + iface, Context: "net.net", Family: iface, Title: "Bandwidth", Units: "kilobits/s",
			ChartType: "area", Plugin: "proc.plugin", Module: "/proc/net/dev", Priority: 7000, UpdateEvery: 1,
			Dims: []store.DimDef{dim("received", "", algIncremental, 8, 1000), dim("sent", "", algIncremental, -8, 1000)},
		}),
		packets: newChart(&store.ChartDef{
			ID: "net_packets." + iface, Context: "net.packets", Family: iface, Title: "Packets", Units: "packets/s",
			ChartType: "line", Plugin: "proc.plugin", Module: "/proc/net/dev", Priority: 7001, UpdateEvery: 1,
			Dims: []store.DimDef{
				dim("received", "", algIncremental, 1, 1), dim("sent", "", algIncremental, -1, 1),
				dim("multicast", "", algIncremental, 1, 1),
			},
		}),
	}
}
