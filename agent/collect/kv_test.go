package collect

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"peerdns/agent/store"
	"peerdns/agent/store/storetest"
)

// dimIDsOf returns the dimension ids of a registered chart.
func dimIDsOf(t *testing.T, db *store.DB, id string) string {
	t.Helper()
	c, ok := db.Chart(id)
	if !ok {
		t.Fatalf("chart %s not registered", id)
	}
	var ids []string
	for _, d := range c.Dims {
		ids = append(ids, d.ID)
	}
	return strings.Join(ids, ",")
}

func TestMeminfoKernels(t *testing.T) {
	t.Run("linux-6.18 no swap, no huge pages", func(t *testing.T) {
		db := storetest.New(t, store.Config{})
		run(t, db, 1, newMeminfo("testdata/linux-6.18"))
		// free 22880408, cached 1426648+130040, buffers 29144, used = total - the rest (KiB → MiB)
		used := (24684092.0 - 22880408 - (1426648 + 130040) - 29144) / 1024
		checkPoints(t, db, "system.ram", [][]float64{{22880408.0 / 1024, used, (1426648.0 + 130040) / 1024, 29144.0 / 1024}})
		checkPoints(t, db, "mem.kernel", [][]float64{{159108.0 / 1024, 1960.0 / 1024, 2752.0 / 1024, 14748.0 / 1024, 712.0 / 1024}})
		for _, id := range []string{"system.swap", "mem.hugepages", "mem.hwcorrupt"} {
			if _, ok := db.Chart(id); ok {
				t.Errorf("%s made on a host without its source", id)
			}
		}
	})
	t.Run("linux-4.19 swap, huge pages, no Percpu", func(t *testing.T) {
		db := storetest.New(t, store.Config{})
		run(t, db, 1, newMeminfo("testdata/linux-4.19"))
		checkPoints(t, db, "system.swap", [][]float64{{985084.0 / 1024, (1046524.0 - 985084) / 1024}})
		// 64 pages of 2 MiB: 48 free, 4 reserved, 12 used
		checkPoints(t, db, "mem.hugepages", [][]float64{{96, 24, 0, 8}})
		if got := dimIDsOf(t, db, "mem.kernel"); got != "Slab,KernelStack,PageTables,VmallocUsed" {
			t.Errorf("mem.kernel dims = %s, want the four this kernel prints", got)
		}
		if _, ok := db.Chart("mem.hwcorrupt"); !ok {
			t.Error("mem.hwcorrupt missing on a kernel that prints HardwareCorrupted")
		}
	})
}

// fileSeq is a kvSource reader that returns the given texts in turn, then
// the last one again.
func fileSeq(texts ...string) func() ([]byte, error) {
	i := 0
	return func() ([]byte, error) {
		s := texts[min(i, len(texts)-1)]
		i++
		if s == "" {
			return nil, os.ErrNotExist
		}
		return []byte(s), nil
	}
}

func TestNetstatRatesResetAndWrap(t *testing.T) {
	snmp, err := os.ReadFile("testdata/linux-4.19/proc/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	s1 := string(snmp)
	s2 := strings.Replace(s1, "Tcp: 1 200 120000 -1 10 20 1 2 3 700 600", "Tcp: 1 200 120000 -1 15 20 1 2 3 900 650", 1)
	// counters reset (a namespace recreated): 100 < 900
	s3 := strings.Replace(s1, "Tcp: 1 200 120000 -1 10 20 1 2 3 700 600", "Tcp: 1 200 120000 -1 15 20 1 2 3 100 50", 1)
	s4 := strings.Replace(s1, "Tcp: 1 200 120000 -1 10 20 1 2 3 700 600", "Tcp: 1 200 120000 -1 15 20 1 2 3 130 60", 1)
	c := newKVColl("netstat", netstatCharts(),
		&kvSource{path: "snmp", parse: parseHeaderPairs, read: fileSeq(s1, s2, s3, s4)},
		&kvSource{path: "netstat", parse: parseHeaderPairs, read: fileSeq(""), optional: true},
		&kvSource{path: "snmp6", prefix: "6.", parse: parseKeyValue, read: fileSeq(""), optional: true},
	)
	db := storetest.New(t, store.Config{})
	run(t, db, 4, c)
	nan := math.NaN()
	// no rate from the first read; none across the reset; then rates again
	checkPoints(t, db, "ipv4.tcppackets", [][]float64{{200, -50}, {nan, nan}, {30, -10}})
	checkPoints(t, db, "ipv4.tcpsock", [][]float64{{3}, {3}, {3}, {3}})
	if got := dimIDsOf(t, db, "ipv4.udperrors"); got != "RcvbufErrors,SndbufErrors,InErrors,NoPorts,InCsumErrors" {
		t.Errorf("ipv4.udperrors dims on a kernel without IgnoredMulti = %s", got)
	}
	// IcmpMsg has only type 3 on this kernel; Netdata's twenty are all there.
	if got := dimIDsOf(t, db, "ipv4.icmpmsg"); strings.Count(got, ",") != 19 {
		t.Errorf("ipv4.icmpmsg dims = %s", got)
	}
	for _, id := range []string{"system.ip", "ipv6.packets"} {
		if _, ok := db.Chart(id); ok {
			t.Errorf("%s made without its file", id)
		}
	}
}

func TestKVFileVanishesAndReturns(t *testing.T) {
	const p1 = "some avg10=1.50 avg60=0.25 avg300=0.00 total=1000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
	const p2 = "some avg10=2.00 avg60=0.50 avg300=0.10 total=3000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
	read := fileSeq(p1, "", p2, p2)
	c := newKVColl("pressure", pressureCharts(),
		&kvSource{path: "cpu", prefix: "cpu.", parse: parsePressure, read: read, optional: true})
	db := storetest.New(t, store.Config{})
	run(t, db, 4, c)
	nan := math.NaN()
	checkPoints(t, db, "system.cpu_some_pressure", [][]float64{{1.5, 0.25, 0}, {nan, nan, nan}, {2, 0.5, 0.1}, {2, 0.5, 0.1}})
	// the gap second gives no point; the rate after it spans two seconds
	checkPoints(t, db, "system.cpu_some_pressure_stall_time", [][]float64{{1}, {0}})
	if _, ok := db.Chart("system.io_some_pressure"); ok {
		t.Error("io pressure made without /proc/pressure/io")
	}
}

func TestKVMalformedLines(t *testing.T) {
	text := "MemTotal: 100 kB\nbogus\nMemFree: x kB\n: 5\nBuffers:\t7 kB\n\n"
	c := newKVColl("meminfo", meminfoCharts(), &kvSource{path: "meminfo", parse: parseKeyValue, read: fileSeq(text)})
	c.derive = deriveMeminfo
	db := storetest.New(t, store.Config{})
	m := run(t, db, 2, c)
	if _, _, failing := m.Stats(); len(failing) != 0 {
		t.Errorf("failing %v", failing)
	}
	if _, ok := db.Chart("system.ram"); ok {
		t.Error("system.ram made without MemFree and Cached")
	}
	c2 := newKVColl("meminfo", meminfoCharts(), &kvSource{path: "meminfo", parse: parseKeyValue, read: fileSeq("garbage\n")})
	m2 := run(t, storetest.New(t, store.Config{}), 1, c2)
	if _, _, failing := m2.Stats(); len(failing) != 1 {
		t.Errorf("a file with no values: failing %v, want the collector", failing)
	}
}

func TestParseNum(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0", 0, true}, {"123", 123, true}, {"-1", -1, true}, {"0.25", 0.25, true}, {"90.50", 90.5, true},
		{"", 0, false}, {"-", 0, false}, {"1x", 0, false}, {"x", 0, false}, {".", 0, false},
		{"18446744073709551615", 18446744073709551615, true},
	}
	for _, tt := range tests {
		got, ok := parseNum([]byte(tt.in))
		if ok != tt.ok || ok && math.Abs(got-tt.want) > 1e-9*math.Max(1, tt.want) {
			t.Errorf("parseNum(%q) = %v, %v, want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// fuzzKV runs a parser on any input: it must not panic, and every value it
// stores must be a number.
func fuzzKV(f *testing.F, parse func([]byte, string, *kvValues) error, keys []string, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		kv := newKVValues()
		for _, k := range keys {
			kv.slot(k)
		}
		_ = parse(b, "", kv)
		for i, v := range kv.vals {
			if kv.seen[i] && math.IsNaN(v) {
				t.Fatalf("NaN stored from %q", b)
			}
		}
	})
}

func FuzzParseHeaderPairs(f *testing.F) {
	seed, _ := os.ReadFile("testdata/linux-6.18/proc/net/netstat")
	fuzzKV(f, parseHeaderPairs, []string{"Tcp.InSegs", "IpExt.InOctets"}, string(seed),
		"Tcp: A B\nTcp: 1 2\n", "Tcp: A\nUdp: 1\nUdp: B\nUdp: 3\n", "X:\n", ":\n:\n")
}

func FuzzParseKeyValue(f *testing.F) {
	seed, _ := os.ReadFile("testdata/linux-6.18/proc/meminfo")
	fuzzKV(f, parseKeyValue, []string{"MemFree", "pgfault"}, string(seed), "pgfault 12\n", "a:\n")
}

func FuzzParseSockstat(f *testing.F) {
	seed, _ := os.ReadFile("testdata/linux-6.18/proc/net/sockstat")
	fuzzKV(f, parseSockstat, []string{"TCP.inuse"}, string(seed), "TCP: inuse\n", "TCP: a b c\n")
}

func FuzzParsePressure(f *testing.F) {
	seed, _ := os.ReadFile("testdata/linux-6.18/proc/pressure/io")
	fuzzKV(f, parsePressure, []string{"some.avg10"}, string(seed), "some avg10=\n", "some =1\n")
}

// TestCounterWrap: a 32-bit counter (a 32-bit kernel's /proc/net/dev) or
// a 64-bit one that wraps gives a gap, never a negative rate, and rates
// resume on the next read.
func TestCounterWrap(t *testing.T) {
	c := newChart(&store.ChartDef{ID: "w", Dims: []store.DimDef{dim("a", "", algIncremental, 1, 1), dim("b", "", algIncremental, 8, 1000)}})
	steps := [][2]float64{
		{4294967290, 18446744073709551000},
		{4294967295, 18446744073709551615},
		{5, 100},   // both wrapped
		{15, 1100}, // rates again
	}
	var got [][]float64
	for i, s := range steps {
		out, ok := c.convert(epoch.Add(time.Duration(i)*time.Second), s[:])
		if ok {
			got = append(got, append([]float64(nil), out...))
		}
	}
	if len(got) != 3 || got[0][0] != 5 || !math.IsNaN(got[1][0]) || !math.IsNaN(got[1][1]) || got[2][0] != 10 || got[2][1] != 8 {
		t.Errorf("rates across a wrap = %v, want [5 x] [NaN NaN] [10 8]", got)
	}
	for _, row := range got {
		for _, v := range row {
			if v < 0 {
				t.Fatalf("negative rate %v", got)
			}
		}
	}
}

// TestKVSourceAppearsLater: swap turned on after the start gets its chart
// within rescanEvery.
func TestKVSourceAppearsLater(t *testing.T) {
	noSwap := "MemTotal: 1000 kB\nMemFree: 500 kB\nCached: 100 kB\nBuffers: 50 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n"
	swap := strings.Replace(strings.Replace(noSwap, "SwapTotal: 0", "SwapTotal: 2048", 1), "SwapFree: 0", "SwapFree: 1024", 1)
	c := newKVColl("meminfo", meminfoCharts(), &kvSource{path: "meminfo", parse: parseKeyValue, read: fileSeq(noSwap, noSwap, swap)})
	for _, k := range []string{"MemTotal", "Cached", "SwapTotal", "SwapFree"} {
		c.kv.slot(k)
	}
	c.derive = deriveMeminfo
	db := storetest.New(t, store.Config{})
	m := run(t, db, 2, c)
	if _, ok := db.Chart("system.swap"); ok {
		t.Fatal("system.swap without swap")
	}
	collectAt(m, int(rescanEvery/time.Second)+1)
	checkPoints(t, db, "system.swap", [][]float64{{1, 1}})
}
