package collect

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"peerdns/agent/store"
	"peerdns/agent/store/storetest"
	"peerdns/internal/testutil"
)

func TestIdleJitter(t *testing.T) {
	c := newIdleJitter()
	db := storetest.New(t, store.Config{})
	m := newManager(db, nil, c)
	m.Collect(epoch.Unix(), epoch) // not woken by the ticker: nothing
	if _, ok := db.Chart("system.idlejitter"); ok {
		t.Fatal("system.idlejitter stored without a measurement")
	}
	m.collect(epoch.Unix()+1, epoch.Add(time.Second), 150*time.Microsecond)
	m.collect(epoch.Unix()+2, epoch.Add(2*time.Second), 2*time.Millisecond)
	checkPoints(t, db, "system.idlejitter", [][]float64{{150, 150, 150}, {2000, 2000, 2000}})
}

// TestRunMeasuresJitter runs the real ticker until a round woken by it
// stored system.idlejitter.
func TestRunMeasuresJitter(t *testing.T) {
	db := storetest.New(t, store.Config{})
	m := newManager(db, nil, newIdleJitter())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, vals, ok := db.Latest("system.idlejitter"); !ok || vals[0] < 0 {
			return fmt.Errorf("no idlejitter point yet (%v)", vals)
		}
		return nil
	})
}

func TestConntrack(t *testing.T) {
	const hdr = "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart\n"
	const r1 = "00000010  00000000 00000001 00000002 00000000 00000000 00000000 00000000 00000003 00000000 00000000 00000000 00000000  00000000 00000000 00000000 00000000\n"
	const r2 = "00000010  00000000 00000001 0000000a 00000000 00000000 00000000 00000000 00000003 00000000 00000000 00000000 00000000  00000000 00000000 00000000 00000000\n"
	c := newKVColl("conntrack", conntrackCharts(),
		&kvSource{path: "nf_conntrack", parse: parseConntrack, read: fileSeq(hdr+r1+r1, hdr+r1+r2)})
	db := storetest.New(t, store.Config{})
	run(t, db, 2, c)
	checkPoints(t, db, "netfilter.conntrack_sockets", [][]float64{{16}, {16}}) // entries: not summed over CPUs
	checkPoints(t, db, "netfilter.conntrack_new", [][]float64{{8, 0, 0}})
	// searched and delete_list are gone from 5.x kernels: 0, as in Netdata
	checkPoints(t, db, "netfilter.conntrack_search", [][]float64{{0, 0, 0}})

	fix := newConntrack("testdata/linux-6.18")
	db2 := storetest.New(t, store.Config{})
	run(t, db2, 2, fix)
	checkDef(t, db2, "netfilter.conntrack_changes", "netfilter.conntrack_changes", "conntrack", "changes/s", "line", 8702,
		"inserted", "deleted", "delete_list")
	none := newConntrack(t.TempDir())
	db3 := storetest.New(t, store.Config{})
	if m := run(t, db3, 2, none); len(db3.Charts()) != 0 {
		_, _, failing := m.Stats()
		t.Errorf("charts without nf_conntrack: %d (failing %v)", len(db3.Charts()), failing)
	}
}

func TestIPC(t *testing.T) {
	sem := "       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n" +
		"         0          0   600          4     0     0     0     0          0 1700000000\n" +
		"         1          1   600          2     0     0     0     0          0 1700000000\n"
	shm := "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n" +
		"         0          2  1600                524288  1234  1234      2  1000  1000  1000  1000 1700000000          0 1700000000                  4096                     0\n"
	c := newIPC("")
	c.readSem, c.readShm = fileSeq(sem), fileSeq(shm)
	db := storetest.New(t, store.Config{})
	run(t, db, 1, c)
	checkPoints(t, db, "system.ipc_semaphores", [][]float64{{6}})
	checkPoints(t, db, "system.ipc_semaphore_arrays", [][]float64{{2}})
	checkPoints(t, db, "system.shared_memory_segments", [][]float64{{1}})
	checkPoints(t, db, "system.shared_memory_bytes", [][]float64{{524288}})
}

func TestZram(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(root+"/sys/block/zram0", 0o755); err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	// orig 300 MiB, compressed 100 MiB, 120 MiB used in all
	if err := os.WriteFile(root+"/sys/block/zram0/mm_stat", []byte(strings.Join([]string{"314572800", "104857600", "125829120", "0", "125829120", "0", "0", "0"}, " ")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newZram(root)
	db := storetest.New(t, store.Config{})
	m := run(t, db, 1, c)
	checkPoints(t, db, "mem.zram_usage.zram0", [][]float64{{100, 20}})
	checkPoints(t, db, "mem.zram_savings.zram0", [][]float64{{-200, 300}})
	checkPoints(t, db, "mem.zram_ratio.zram0", [][]float64{{3}})
	checkPoints(t, db, "mem.zram_efficiency.zram0", [][]float64{{100.0 * 100 / 120}})
	_ = mib
	// the device goes away: its charts go at the next rescan
	if err := os.RemoveAll(root + "/sys/block/zram0"); err != nil {
		t.Fatal(err)
	}
	now := epoch.Add(rescanEvery + time.Second)
	m.Collect(now.Unix(), now)
	if _, ok := db.Chart("mem.zram_usage.zram0"); ok {
		t.Error("zram0 charts still listed after the device went away")
	}
}

// TestZramBadDevice has devices whose mm_stat does not parse beside one that
// does: the good one gets its point every second, and the collector is
// reported failing.
func TestZramBadDevice(t *testing.T) {
	root := t.TempDir()
	stats := map[string]string{
		"zram0": "314572800 104857600\n",   // short
		"zram1": "314572800 x 125829120\n", // unparsable
		"zram2": "zz\n",
		"zram3": "314572800 104857600 125829120 0 125829120 0 0 0\n",
	}
	for name, s := range stats {
		if err := os.MkdirAll(root+"/sys/block/"+name, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(root+"/sys/block/"+name+"/mm_stat", []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := storetest.New(t, store.Config{})
	m := run(t, db, 6, newZram(root))
	checkPoints(t, db, "mem.zram_usage.zram3", [][]float64{{100, 20}, {100, 20}, {100, 20}, {100, 20}, {100, 20}, {100, 20}})
	if _, _, failing := m.Stats(); strings.Join(failing, ",") != "zram" {
		t.Errorf("failing collectors = %v, want [zram]", failing)
	}
}

func FuzzParseConntrack(f *testing.F) {
	seed, _ := os.ReadFile("testdata/linux-6.18/proc/net/stat/nf_conntrack")
	f.Add(seed)
	f.Add([]byte("entries new\nzz 1\n1\n"))
	fuzzKV(f, parseConntrack, []string{"ct.entries", "ct.new"})
}

func TestTimex(t *testing.T) {
	c := newTimex()
	calls := 0
	c.adjtimex = func(tx *syscall.Timex) (int, error) {
		calls++
		if tx.Modes != 0 {
			t.Fatalf("adjtimex called with modes %#x: it must only read", tx.Modes)
		}
		if calls == 1 {
			tx.Status, tx.Offset = staNano, 2_500_000 // 2.5 ms in ns
			return 0, nil
		}
		tx.Status, tx.Offset = staUnsync, 1500 // 1.5 ms in µs
		return timeError, nil
	}
	db := storetest.New(t, store.Config{})
	run(t, db, 2, c)
	checkPoints(t, db, "system.clock_sync_state", [][]float64{{1}, {0}})
	checkPoints(t, db, "system.clock_status", [][]float64{{0, 0}, {1, 1}})
	checkPoints(t, db, "system.clock_sync_offset", [][]float64{{2.5}, {1.5}})
	// the real call works here
	real := newTimex()
	if _, err := real.adjtimex(&real.tx); err != nil {
		t.Errorf("adjtimex on this host: %v", err)
	}
}

// TestKeptOpenBudget: readers beyond the budget still read, without
// keeping their file open.
func TestKeptOpenBudget(t *testing.T) {
	before := keptOpen.Load()
	keptOpen.Add(keptOpenMax) // as if the budget were used up
	defer keptOpen.Add(-keptOpenMax)
	r := newProcReader("testdata/linux-6.18/proc/loadavg")
	for i := 0; i < 2; i++ {
		b, err := r.read()
		if err != nil || len(b) == 0 {
			t.Fatalf("read over budget = %q, %v", b, err)
		}
		if r.f != nil {
			t.Fatal("a reader over budget kept its file open")
		}
	}
	if keptOpen.Load() != before+keptOpenMax {
		t.Errorf("keptOpen = %d, want %d", keptOpen.Load(), before+keptOpenMax)
	}
	r2 := newProcReader("testdata/linux-6.18/proc/uptime")
	keptOpen.Add(-keptOpenMax)
	if _, err := r2.read(); err != nil || r2.f == nil {
		t.Errorf("a reader within budget: err %v, kept %v", err, r2.f != nil)
	}
	r2.close()
	keptOpen.Add(keptOpenMax)
	if keptOpen.Load() != before+keptOpenMax {
		t.Errorf("keptOpen after close = %d, want %d", keptOpen.Load(), before+keptOpenMax)
	}
}
