package collect

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"peerdns/agent/store"
	"peerdns/agent/store/storetest"
	"peerdns/internal/testutil"
)

const cgID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// copyTree copies a fixture tree to a temporary directory the test may
// change.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func collectAt(m *Manager, s int) {
	now := epoch.Add(time.Duration(s) * time.Second)
	m.Collect(now.Unix(), now)
}

func TestCgroupsV2(t *testing.T) {
	root := copyTree(t, "testdata/cgroup-v2")
	g := root + "/sys/fs/cgroup"
	c := newCgroups(root)
	db := storetest.New(t, store.Config{})
	m := run(t, db, 1, c)
	docker := g + "/system.slice/docker-" + cgID + ".scope"
	write(t, docker+"/cpu.stat", "usage_usec 5500000\nuser_usec 3300000\nsystem_usec 2200000\nnr_periods 10\nnr_throttled 1\nthrottled_usec 500\n")
	write(t, docker+"/io.stat", "254:0 rbytes=1058816 wbytes=2097152 rios=15 wios=20\n253:0 rbytes=1024 wbytes=0 rios=1 wios=0\n")
	write(t, g+"/system.slice/ssh.service/cpu.stat", "usage_usec 1250000\nuser_usec 700000\nsystem_usec 550000\n")
	collectAt(m, 1)

	const ct = "cgroup_0123456789ab"
	checkDef(t, db, ct+".cpu", "cgroup.cpu", "cpu", "percentage", "stacked", 40000, "user", "system")
	checkPoints(t, db, ct+".cpu", [][]float64{{30, 20}})
	checkPoints(t, db, ct+".mem_usage", [][]float64{{100, 0}, {100, 0}})
	checkPoints(t, db, ct+".io", [][]float64{{10, 0}}) // +10 KiB read
	checkPoints(t, db, ct+".serviced_ops", [][]float64{{5, 0}})
	checkPoints(t, db, ct+".cpu_some_pressure", [][]float64{{1, 0.5, 0.1}, {1, 0.5, 0.1}})
	if got := dimIDsOf(t, db, ct+".mem"); got != "anon,kernel_stack,slab,sock,anon_thp,file" {
		t.Errorf("%s.mem dims = %s", ct, got)
	}
	checkDef(t, db, "services.cpu", "services.cpu", "cpu", "percentage", "stacked", 19000, "cron", "ssh")
	checkPoints(t, db, "services.cpu", [][]float64{{0, 25}})
	checkPoints(t, db, "services.mem_usage", [][]float64{{4, 4}, {4, 4}})
	for _, c := range db.Charts() {
		if strings.Contains(c.ID, "user") || strings.Contains(c.ID, "init") || strings.Contains(c.ID, "ssh") {
			t.Errorf("chart %s: user sessions, init.scope and services have no cgroup_ charts", c.ID)
		}
	}

	// ssh stops and the container goes: at the next walk their charts go
	if err := os.RemoveAll(g + "/system.slice/ssh.service"); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(docker); err != nil {
		t.Fatal(err)
	}
	collectAt(m, 2)
	collectAt(m, 1+int(cgroupScanEvery/time.Second))
	collectAt(m, 2+int(cgroupScanEvery/time.Second)) // services.cpu rebuilt: a rate needs two reads
	if _, ok := db.Chart(ct + ".cpu"); ok {
		t.Error("charts of a removed container still listed")
	}
	if got := dimIDsOf(t, db, "services.cpu"); got != "cron" {
		t.Errorf("services.cpu dims after ssh stopped = %s, want cron", got)
	}
}

// TestCgroupThrottled: cgroup.throttled is the share of the CPU periods
// since the last read in which the cgroup was throttled, in percent, as
// Netdata computes it (not throttled periods per second).
func TestCgroupThrottled(t *testing.T) {
	root := copyTree(t, "testdata/cgroup-v2")
	docker := root + "/sys/fs/cgroup/system.slice/docker-" + cgID + ".scope"
	c := newCgroups(root)
	db := storetest.New(t, store.Config{})
	m := run(t, db, 1, c) // nr_periods 10, nr_throttled 1
	write(t, docker+"/cpu.stat", "usage_usec 5000000\nuser_usec 3000000\nsystem_usec 2000000\nnr_periods 30\nnr_throttled 11\nthrottled_usec 900\n")
	collectAt(m, 1)
	collectAt(m, 2) // no period since the last read
	write(t, docker+"/cpu.stat", "usage_usec 5000000\nuser_usec 3000000\nsystem_usec 2000000\nnr_periods 5\nnr_throttled 5\nthrottled_usec 900\n")
	collectAt(m, 3) // counters went backwards
	checkDef(t, db, "cgroup_0123456789ab.throttled", "cgroup.throttled", "cpu", "percentage", "line", 40005, "throttled")
	checkPoints(t, db, "cgroup_0123456789ab.throttled", [][]float64{{10}, {50}, {0}, {0}})
}

func TestCgroupsV1(t *testing.T) {
	root := copyTree(t, "testdata/cgroup-v1")
	g := root + "/sys/fs/cgroup"
	c := newCgroups(root)
	db := storetest.New(t, store.Config{})
	m := run(t, db, 1, c)
	write(t, g+"/cpu,cpuacct/docker/"+cgID+"/cpuacct.stat", "user 350\nsystem 210\n")
	write(t, g+"/blkio/docker/"+cgID+"/blkio.throttle.io_service_bytes", "254:0 Read 1069056\n254:0 Write 2097152\n254:0 Total 3166208\nTotal 3166208\n")
	collectAt(m, 1)
	const ct = "cgroup_0123456789ab"
	checkPoints(t, db, ct+".cpu", [][]float64{{50, 10}}) // USER_HZ ticks/s = percent
	checkPoints(t, db, ct+".io", [][]float64{{20, 0}})
	checkPoints(t, db, ct+".mem", [][]float64{{40, 50, 0, 0, 1}, {40, 50, 0, 0, 1}})
	checkDef(t, db, "services.mem_usage", "services.mem_usage", "mem", "MiB", "stacked", 19010, "cron")
	if _, ok := db.Chart("cgroup_docker.cpu"); ok {
		t.Error("the /docker grouping directory got charts")
	}
}

func TestCgroupsCap(t *testing.T) {
	root := copyTree(t, "testdata/cgroup-v2")
	base := root + "/sys/fs/cgroup/machine.slice"
	for i := 0; i < 10000; i++ {
		if err := os.MkdirAll(fmt.Sprintf("%s/vm%05d.scope", base, i), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var logs testutil.LogBuffer
	c := newCgroups(root)
	db := storetest.New(t, store.Config{})
	m := newManager(db, slog.New(slog.NewTextHandler(&logs, nil)), c)
	t.Cleanup(m.close)
	collectAt(m, 0)
	collectAt(m, 1)
	if len(c.groups) != maxInstances {
		t.Errorf("%d cgroups tracked, want the cap %d", len(c.groups), maxInstances)
	}
	if n := strings.Count(logs.String(), "too many instances"); n != 1 {
		t.Errorf("%d cap log lines, want 1", n)
	}
}

func TestCgroupKind(t *testing.T) {
	tests := []struct {
		rel, name      string
		service, chart bool
	}{
		{"system.slice/ssh.service", "ssh", true, true},
		{"system.slice/docker-" + cgID + ".scope", "0123456789ab", false, true},
		{"docker/" + cgID, "0123456789ab", false, true},
		{"docker", "", false, false},
		{"user.slice/user-1000.slice/session-1.scope", "", false, false},
		{"init.scope", "", false, false},
		{"system.slice", "", false, false},
		{"system.slice/ssh.service/child", "", false, false},
		{"machine.slice/machine-qemu\\x2d1.scope", "machine-qemu_x2d1", false, true},
		{"lxc/web1", "web1", false, true},
	}
	for _, tt := range tests {
		name, service, chart := cgroupKind(tt.rel)
		if name != tt.name || service != tt.service || chart != tt.chart {
			t.Errorf("cgroupKind(%q) = %q, %v, %v, want %q, %v, %v", tt.rel, name, service, chart, tt.name, tt.service, tt.chart)
		}
	}
}

func FuzzParseIOStat(f *testing.F) {
	f.Add([]byte("254:0 rbytes=1 wbytes=2 rios=3 wios=4\n"))
	f.Add([]byte("x =\n=1 rbytes=\n"))
	fuzzKV(f, parseIOStat, []string{"rbytes", "wios"})
}

func FuzzParseBlkio(f *testing.F) {
	f.Add([]byte("254:0 Read 1\nTotal 1\n"))
	fuzzKV(f, parseBlkio, []string{"Read", "Write"})
}
