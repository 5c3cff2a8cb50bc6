package collect

import (
	"os"
	"strings"
	"testing"

	"peerdns/agent/store"
	"peerdns/agent/store/storetest"
)

func TestApps(t *testing.T) {
	root := copyTree(t, "testdata/linux-6.18")
	c := newApps(root)
	db := storetest.New(t, store.Config{})
	m := run(t, db, 1, c)
	// sshd: +50 user and +30 system ticks, +10 KiB read from disk, +20 minor faults
	write(t, root+"/proc/4242/stat", "4242 (sshd) R 1 4242 4242 0 -1 4194560 520 0 3 0 170 110 0 0 20 0 1 0 1000 10485760 1024 18446744073709551615 1 1 0 0 0 0 0 4096 1256 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
	write(t, root+"/proc/4242/io", "rchar: 1048576\nwchar: 2048\nread_bytes: 14336\nwrite_bytes: 0\n")
	collectAt(m, 1)

	checkDef(t, db, "apps.cpu", "apps.cpu", "cpu", "percentage", "stacked", 20001, "kernel", "other", "ssh")
	checkPoints(t, db, "apps.cpu", [][]float64{{0, 0, 0}, {0, 0, 80}})
	checkPoints(t, db, "apps.cpu_user", [][]float64{{0, 0, 0}, {0, 0, 50}})
	checkPoints(t, db, "apps.preads", [][]float64{{0, 0, 0}, {0, 0, 10}})
	checkPoints(t, db, "apps.minor_faults", [][]float64{{0, 0, 0}, {0, 0, 20}})
	checkPoints(t, db, "apps.processes", [][]float64{{1, 1, 1}, {1, 1, 1}})
	checkPoints(t, db, "users.cpu", [][]float64{{0}, {80}})
	checkDef(t, db, "groups.mem", "groups.mem", "mem", "MiB", "stacked", 20003, "root")
	checkPoints(t, db, "system.processes_state", [][]float64{{1, 0, 2, 0, 0}, {1, 0, 2, 0, 0}})
	page := float64(os.Getpagesize())
	checkPoints(t, db, "apps.mem", [][]float64{{0, 3388 * page / (1 << 20), 1024 * page / (1 << 20)}, {0, 3388 * page / (1 << 20), 1024 * page / (1 << 20)}})

	// sshd exits: its group keeps its dimension, at 0; no negative rate
	if err := os.RemoveAll(root + "/proc/4242"); err != nil {
		t.Fatal(err)
	}
	collectAt(m, 2)
	checkPoints(t, db, "apps.processes", [][]float64{{1, 1, 1}, {1, 1, 1}, {1, 1, 0}})
	checkPoints(t, db, "apps.cpu", [][]float64{{0, 0, 0}, {0, 0, 80}, {0, 0, 0}})
}

// TestAppsPidReused: a pid that names another process (the old one
// exited and the pid came round again between two reads) is counted in
// the new process's group, and its counters do not continue the old one's.
func TestAppsPidReused(t *testing.T) {
	root := copyTree(t, "testdata/linux-6.18")
	c := newApps(root)
	db := storetest.New(t, store.Config{})
	m := run(t, db, 1, c)
	// sshd (4242, started at tick 1000) is gone; "mystery" got its pid at
	// tick 90000 and has used 150 ticks.
	write(t, root+"/proc/4242/stat", "4242 (mystery) S 1 4242 4242 0 -1 4194560 600 0 0 0 100 50 0 0 20 0 1 0 90000 10485760 1024 18446744073709551615 1 1 0 0 0 0 0 4096 1256 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
	collectAt(m, 1)
	checkDef(t, db, "apps.processes", "apps.processes", "processes", "processes", "stacked", 20007, "kernel", "other", "ssh")
	checkPoints(t, db, "apps.processes", [][]float64{{1, 1, 1}, {1, 2, 0}})
	checkPoints(t, db, "apps.cpu", [][]float64{{0, 0, 0}, {0, 0, 0}})
}

func TestAppGroup(t *testing.T) {
	tests := []struct {
		comm   string
		kernel bool
		want   string
	}{
		{"sshd", false, "ssh"}, {"systemd-journal", false, "system"}, {"kworker/0:1", true, "kernel"},
		{"collect.test", false, "go"}, {"python3.11", false, "python"}, {"mystery", false, "other"},
		{"chrome_crashpad", false, "browsers"},
		{"python.d.plugin", false, "python.d.plugin"}, {"tc-qos-helper.s", false, "tc-qos-helper"},
		{"cups.plugin", false, "cups.plugin"}, {"python3", false, "python"},
	}
	for _, tt := range tests {
		if got := appGroup(tt.comm, tt.kernel); got != tt.want {
			t.Errorf("appGroup(%q, %v) = %q, want %q", tt.comm, tt.kernel, got, tt.want)
		}
	}
}

func FuzzProcFiles(f *testing.F) {
	f.Add([]byte("4242 (ss) d) R 1 2 3\n"))
	f.Add([]byte("Uid:\t0\nGid:\nVmSwap: x kB\nread_bytes: 9\n"))
	f.Add([]byte(")("))
	f.Fuzz(func(t *testing.T, b []byte) {
		comm, rest := splitStat(b)
		if len(comm)+len(rest) > len(b) {
			t.Fatalf("splitStat(%q) = %q, %q", b, comm, rest)
		}
		statusIDs(b)
		StatusKiB(b, "VmSwap:")
		ioCounters(b)
	})
}

// TestAppGroupsCoverReference: every application group Netdata charted on
// the reference host (the dimensions of its apps.cpu) is one this table
// can make.
func TestAppGroupsCoverReference(t *testing.T) {
	ref, ok := loadRef(t)["apps.cpu"]
	if !ok {
		t.Fatal("no apps.cpu in the reference")
	}
	ours := map[string]bool{"kernel": true, "other": true}
	for _, g := range appGroups {
		ours[g.group] = true
	}
	for _, d := range ref.Dimensions {
		if !ours[d[1]] {
			t.Errorf("Netdata's group %q is not one of ours", d[1])
		}
	}
}

// TestAppsSwapHostileName: a process that names itself like a status
// line ("VmSwap:9999999 " fits in the 15 bytes of a comm) has that name
// on the Name line of its /proc/<pid>/status, before the real VmSwap
// line; its group's swap is the real one (2 MiB), not the name's (9.5 GiB).
func TestAppsSwapHostileName(t *testing.T) {
	root := copyTree(t, "testdata/linux-6.18")
	meminfo, err := os.ReadFile(root + "/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	write(t, root+"/proc/meminfo", strings.Replace(string(meminfo), "SwapTotal:             0 kB", "SwapTotal:       1048576 kB", 1))
	write(t, root+"/proc/4242/stat", "4242 (VmSwap:9999999 ) R 1 4242 4242 0 -1 4194560 500 0 3 0 120 80 0 0 20 0 1 0 1000 10485760 1024 18446744073709551615 1 1 0 0 0 0 0 4096 1256 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
	write(t, root+"/proc/4242/status", "Name:\tVmSwap:9999999 \nUmask:\t0022\nState:\tR (running)\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nVmSwap:\t    2048 kB\n")
	db := storetest.New(t, store.Config{})
	run(t, db, 1, newApps(root))
	checkDef(t, db, "apps.swap", "apps.swap", "swap", "MiB", "stacked", 20011, "kernel", "other")
	checkPoints(t, db, "apps.swap", [][]float64{{0, 2}})
}

// TestAppsSwapOn: swap turned on after a process was first seen (swapon
// on a host that had none) is counted in its group's swap once SwapTotal
// is read again (every minute).
func TestAppsSwapOn(t *testing.T) {
	root := copyTree(t, "testdata/linux-6.18")
	db := storetest.New(t, store.Config{})
	m := run(t, db, 1, newApps(root)) // no swap: SwapTotal 0
	meminfo, err := os.ReadFile(root + "/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	write(t, root+"/proc/meminfo", strings.Replace(string(meminfo), "SwapTotal:             0 kB", "SwapTotal:       1048576 kB", 1))
	write(t, root+"/proc/4242/status", "Name:\tsshd\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nVmSwap:\t    2048 kB\n")
	collectAt(m, 60)
	checkDef(t, db, "apps.swap", "apps.swap", "swap", "MiB", "stacked", 20011, "kernel", "other", "ssh")
	if at, vals, ok := db.Latest("apps.swap"); !ok || at != epoch.Unix()+60 || !near(vals[2], 2) {
		t.Errorf("apps.swap latest = %v at %d (%v), want ssh 2 MiB at %d", vals, at, ok, epoch.Unix()+60)
	}
}

func TestStatusKiBLineStart(t *testing.T) {
	b := []byte("Name:\tRssFile:7777 \nRssFile:\t     512 kB\n")
	if got := StatusKiB(b, "RssFile:"); got != 512 {
		t.Errorf("StatusKiB = %v, want 512", got)
	}
}
