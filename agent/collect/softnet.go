package collect

import (
	"fmt"

	"peerdns/agent/store"
)

// softnetColl stores system.softnet_stat and cpu.cpuN_softnet_stat from
// /proc/net/softnet_stat (Netdata's proc_net_softnet_stat): per CPU a line
// of hexadecimal counters; Netdata charts columns 1 (processed), 2
// (dropped), 3 (time squeezed), 10 (received_rps) and 11
// (flow_limit_count). Kernels before 2.6.36 print only 9 columns: those
// lines count 0 for the last two. Lines are numbered as Netdata numbers
// them (line N is cpuN; the kernel leaves offline CPUs out).
type softnetColl struct {
	read  func() ([]byte, error)
	done  func()
	sys   *chart
	cores []*chart
	rows  [][5]float64
	fs    [][]byte
	sum   [5]float64
}

var softnetCols = [5]int{0, 1, 2, 9, 10}

func newSoftnet(root string) *softnetColl {
	r := newProcReader(root + "/proc/net/softnet_stat")
	return &softnetColl{read: r.read, done: r.close}
}

func (c *softnetColl) name() string { return "softnet" }

func (c *softnetColl) close() {
	if c.done != nil {
		c.done()
	}
}

func softnetDef(id, context, title string, prio int) *store.ChartDef {
	return &store.ChartDef{
		ID: id, Context: context, Family: "softnet_stat", Title: title, Units: "events/s", ChartType: "line",
		Plugin: "proc.plugin", Module: "/proc/net/softnet_stat", Priority: prio, UpdateEvery: 1,
		Dims: []store.DimDef{
			dim("processed", "", algIncremental, 1, 1), dim("dropped", "", algIncremental, 1, 1),
			dim("squeezed", "", algIncremental, 1, 1), dim("received_rps", "", algIncremental, 1, 1),
			dim("flow_limit_count", "", algIncremental, 1, 1),
		},
	}
}

// parseSoftnet reads the file into rows (reused).
func parseSoftnet(rows [][5]float64, fs [][]byte, b []byte) ([][5]float64, [][]byte, error) {
	rows = rows[:0]
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		fs = fields(fs[:0], line)
		if len(fs) < 9 {
			continue
		}
		var r [5]float64
		ok := true
		for i, col := range softnetCols {
			if col >= len(fs) {
				continue
			}
			v, good := parseHex(fs[col])
			if !good {
				ok = false
				break
			}
			r[i] = v
		}
		if ok {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return rows, fs, errNoValues
	}
	return rows, fs, nil
}

// parseHex parses a hexadecimal counter without allocating.
func parseHex(b []byte) (float64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var v uint64
	for _, ch := range b {
		switch {
		case ch >= '0' && ch <= '9':
			v = v<<4 | uint64(ch-'0')
		case ch >= 'a' && ch <= 'f':
			v = v<<4 | uint64(ch-'a'+10)
		case ch >= 'A' && ch <= 'F':
			v = v<<4 | uint64(ch-'A'+10)
		default:
			return 0, false
		}
	}
	return float64(v), true
}

func (c *softnetColl) collect(tk *tick) error {
	b, err := c.read()
	if err != nil {
		return fmt.Errorf("read /proc/net/softnet_stat: %w", err)
	}
	c.rows, c.fs, err = parseSoftnet(c.rows, c.fs, b)
	if err != nil {
		return fmt.Errorf("/proc/net/softnet_stat: %w", err)
	}
	if c.sys == nil {
		c.sys = newChart(softnetDef("system.softnet_stat", "system.softnet_stat", "System softnet_stat", 955))
	}
	// CPUs that went offline: drop their charts
	for len(c.cores) > len(c.rows) {
		tk.remove(c.cores[len(c.cores)-1].def)
		c.cores = c.cores[:len(c.cores)-1]
	}
	c.sum = [5]float64{}
	for i := range c.rows {
		if i == len(c.cores) {
			c.cores = append(c.cores, newChart(softnetDef(fmt.Sprintf("cpu.cpu%d_softnet_stat", i), "cpu.softnet_stat", "CPU softnet_stat", 4101+i)))
		}
		for j, v := range c.rows[i] {
			c.sum[j] += v
		}
		c.cores[i].emit(tk, c.rows[i][:])
	}
	c.sys.emit(tk, c.sum[:])
	return nil
}
