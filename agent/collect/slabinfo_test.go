package collect

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"peerdns/agent/store"
	"peerdns/agent/store/storetest"
)

const slabHeader = "slabinfo - version: 2.1\n" +
	"# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata <active_slabs> <num_slabs> <sharedavail>\n"

// A SLAB kernel's file (real tunables) from the 4.19 fixture: every value
// worked out by hand from its columns.
func TestSlabinfoSLAB(t *testing.T) {
	db := storetest.New(t, store.Config{})
	run(t, db, 1, newSlabinfo("testdata/linux-4.19"))
	names := []string{"ext4_inode_cache", "dentry", "buffer_head", "kmalloc-8192", "kmalloc-128", "nfs_inode_cache"}
	checkDef(t, db, "mem.slabmemory", "mem.slabmemory", "slab", "B", "line", 3000, names...)
	checkDef(t, db, "mem.slabfilling", "mem.slabfilling", "slab", "%", "line", 3001, names...)
	checkDef(t, db, "mem.slabwaste", "mem.slabwaste", "slab", "B", "line", 3002, names...)
	p := float64(os.Getpagesize())
	checkPoints(t, db, "mem.slabmemory", [][]float64{{13784 * p, 5660 * p, 1575 * p, 36 * 2 * p, 76 * p, 0}})
	// whole percents, truncated: 41230/41352 is 99.7%
	checkPoints(t, db, "mem.slabfilling", [][]float64{{99, 99, 100, 94, 96, 0}})
	checkPoints(t, db, "mem.slabwaste", [][]float64{{
		13784*p - 41230*1080, 5660*p - 118422*192, 1575*p - 61425*104, 36*2*p - 34*8192, 76*p - 2344*128, 0,
	}})
}

// The SLUB file captured on the 6.18 host: one dimension per cache line,
// in the file's order, and memory that adds up to what the kernel prints.
func TestSlabinfoSLUBFixture(t *testing.T) {
	raw, err := os.ReadFile("testdata/linux-6.18/proc/slabinfo")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var total float64
	p := float64(os.Getpagesize())
	for _, line := range strings.Split(string(raw), "\n")[2:] {
		f := strings.Fields(line)
		if len(f) == 16 {
			names = append(names, f[0])
			slabs, _ := parseNum([]byte(f[14]))
			pages, _ := parseNum([]byte(f[5]))
			total += slabs * pages * p
		}
	}
	if len(names) < 200 {
		t.Fatalf("fixture has %d caches", len(names))
	}
	db := storetest.New(t, store.Config{})
	run(t, db, 2, newSlabinfo("testdata/linux-6.18"))
	checkDef(t, db, "mem.slabmemory", "mem.slabmemory", "slab", "B", "line", 3000, names...)
	_, vals, ok := db.Latest("mem.slabmemory")
	if !ok {
		t.Fatal("no mem.slabmemory point")
	}
	var sum float64
	for _, v := range vals {
		sum += v
	}
	if !near(sum, total) {
		t.Errorf("slab memory sums to %v, the file says %v", sum, total)
	}
	_, fill, _ := db.Latest("mem.slabfilling")
	for i, v := range fill {
		if v < 0 || v > 100 {
			t.Errorf("%s filling %v%%", names[i], v)
		}
	}
	_, waste, _ := db.Latest("mem.slabwaste")
	for i, v := range waste {
		if v < 0 || v > vals[i] {
			t.Errorf("%s waste %v of %v", names[i], v, vals[i])
		}
	}
}

// Caches come and go (a module loaded, a filesystem unmounted): the
// charts follow the list; a cache listed twice gets a suffixed
// dimension; malformed lines are skipped; a file that vanishes fails the
// collector without touching the charts, and it recovers.
func TestSlabinfoCachesComeAndGo(t *testing.T) {
	line := func(name string, active, objs int) string {
		return strings.Join([]string{name, strconv.Itoa(active), strconv.Itoa(objs), "64", "64", "1", ":", "tunables", "0", "0", "0", ":", "slabdata", "1", "1", "0"}, " ") + "\n"
	}
	c := newSlabinfo("")
	c.read = fileSeq(
		slabHeader+line("a", 10, 64)+line("b", 64, 64),
		slabHeader+line("a", 32, 64)+"garbage : slabdata x\n"+line("xfs_inode", 1, 64)+line("b", 0, 64)+line("b", 1, 64),
		"",
		slabHeader+line("a", 64, 64),
	)
	db := storetest.New(t, store.Config{})
	m := newManager(db, nil, c)
	t.Cleanup(m.close)
	at := func(i int) {
		now := epoch.Add(time.Duration(i) * time.Second)
		m.Collect(now.Unix(), now)
	}
	at(0)
	checkDef(t, db, "mem.slabfilling", "mem.slabfilling", "slab", "%", "line", 3001, "a", "b")
	if _, v, _ := db.Latest("mem.slabfilling"); v[0] != 15 || v[1] != 100 {
		t.Errorf("filling %v, want [15 100]", v)
	}
	at(1)
	checkDef(t, db, "mem.slabfilling", "mem.slabfilling", "slab", "%", "line", 3001, "a", "xfs_inode", "b", "b#2")
	if _, v, _ := db.Latest("mem.slabfilling"); len(v) != 4 || v[0] != 50 || v[2] != 0 || v[3] != 1 {
		t.Errorf("filling %v, want [50 1 0 1]", v)
	}
	at(2)
	if _, _, failing := m.Stats(); len(failing) != 1 {
		t.Errorf("failing %v after the file vanished", failing)
	}
	at(3)
	checkDef(t, db, "mem.slabwaste", "mem.slabwaste", "slab", "B", "line", 3002, "a")
	if _, _, failing := m.Stats(); len(failing) != 0 {
		t.Errorf("still failing %v", failing)
	}
}

// More caches than maxInstances: the first ones are charted.
func TestSlabinfoCap(t *testing.T) {
	var b strings.Builder
	b.WriteString(slabHeader)
	for i := 0; i < maxInstances+5; i++ {
		b.WriteString("cache" + strconv.Itoa(i) + " 1 2 64 64 1 : tunables 0 0 0 : slabdata 1 1 0\n")
	}
	c := newSlabinfo("")
	c.read = fileSeq(b.String())
	db := storetest.New(t, store.Config{})
	run(t, db, 2, c)
	ch, ok := db.Chart("mem.slabmemory")
	if !ok || len(ch.Dims) != maxInstances {
		t.Fatalf("charted %d caches, want %d", len(ch.Dims), maxInstances)
	}
}

func FuzzParseSlabinfo(f *testing.F) {
	seed, _ := os.ReadFile("testdata/linux-4.19/proc/slabinfo")
	f.Add(seed)
	f.Add([]byte(slabHeader + "x 1 2 3 4 5 : tunables 0 0 0 : slabdata 1 2 3 4\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, _, _ := parseSlabinfo(nil, []string{"x"}, nil, b)
		if len(rows) > maxInstances {
			t.Fatalf("%d rows", len(rows))
		}
		for _, r := range rows {
			if r.active < 0 || r.objs < 0 || r.slabs < 0 {
				t.Fatalf("negative row %+v", r)
			}
		}
	})
}

// Options.NoSlabinfo (AGENT_SLABINFO=0) leaves the collector out, and
// only it.
func TestNoSlabinfo(t *testing.T) {
	db := storetest.New(t, store.Config{})
	with, without := New(db, nil, Options{}), New(db, nil, Options{NoSlabinfo: true})
	t.Cleanup(with.close)
	t.Cleanup(without.close)
	if len(with.cs) != len(hostCollectors("")) || len(without.cs) != len(with.cs)-1 {
		t.Fatalf("%d collectors with, %d without", len(with.cs), len(without.cs))
	}
	for _, c := range without.cs {
		if c.name() == "slabinfo" {
			t.Fatal("slabinfo collector still there")
		}
	}
}
