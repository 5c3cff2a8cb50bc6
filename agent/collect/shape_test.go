package collect

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"peerdns/agent/store"
	"peerdns/agent/store/storetest"
)

// refChart is one chart of testdata/netdata137_system_charts.json, the
// reference api_v1_charts.json of Netdata 1.37 on the VM the fixtures in
// testdata/linux-6.18 come from, without Netdata's self-monitoring charts.
type refChart struct {
	Context, Family, Title, Units string
	ChartType                     string `json:"chart_type"`
	Priority                      int
	Plugin, Module                string
	Dimensions                    [][2]string
}

func loadRef(t *testing.T) map[string]refChart {
	t.Helper()
	raw, err := os.ReadFile("testdata/netdata137_system_charts.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct{ Charts map[string]refChart }
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Charts) < 150 {
		t.Fatalf("%d reference charts decoded", len(ref.Charts))
	}
	return ref.Charts
}

// fixtureModules are the modules whose collectors read everything from
// the fixture tree: every reference chart of these modules must be made
// from testdata/linux-6.18, except the ones listed in notOnFixture.
var fixtureModules = map[string]bool{
	"/proc/meminfo": true, "/proc/vmstat": true, "/proc/pressure": true, "/proc/net/netstat": true,
	"/proc/net/sockstat": true, "/proc/stat": true, "/proc/interrupts": true, "/proc/softirqs": true,
	"/proc/net/softnet_stat": true, "/proc/net/dev": true, "/proc/diskstats": true,
	"/proc/net/stat/nf_conntrack": true, "ipc": true, "/sys/block/zram": true, "/proc/loadavg": true, "/proc/uptime": true,
}

// notOnFixture are reference charts whose source the fixture does not
// carry, with the reason.
var notOnFixture = map[string]string{}

// everySource are the contexts where this agent makes a dimension for
// every source the kernel lists, where Netdata adds one when its counter
// first leaves zero (see perCPUColl): the reference dimensions must be
// among ours, in the same order.
var everySource = map[string]bool{
	"system.interrupts": true, "cpu.interrupts": true, "system.softirqs": true, "cpu.softirqs": true,
}

// hostDims are the context families whose dimensions are the host's own
// process groups, users and user groups (apps.plugin): only the chart
// definitions are compared.
var hostDims = map[string]bool{"apps": true, "users": true, "groups": true}

func subsequence(sub, all [][2]string) bool {
	i := 0
	for _, d := range all {
		if i < len(sub) && d == sub[i] {
			i++
		}
	}
	return i == len(sub)
}

// TestCatalogMatchesNetdata runs the collectors on files captured from the
// reference VM and compares every chart they make that Netdata 1.37 also
// made there: id, context, family, title, units, chart type, priority,
// plugin, module and the dimensions' ids and names in order.
func TestCatalogMatchesNetdata(t *testing.T) {
	ref := loadRef(t)
	db := storetest.New(t, store.Config{})
	m := run(t, db, 3, hostCollectors("testdata/linux-6.18")...)
	m.collect(epoch.Unix()+3, epoch.Add(3*time.Second), 100*time.Microsecond) // as if woken by the ticker
	got := map[string]*store.ChartDef{}
	dims := 0
	for _, c := range db.Charts() {
		got[c.ID] = c
		dims += len(c.Dims)
	}
	matched := 0
	for id, c := range got {
		want, ok := ref[id]
		if !ok {
			continue
		}
		matched++
		gotDef := fmt.Sprintf("%s|%s|%s|%s|%s|%d|%s|%s", c.Context, c.Family, c.Title, c.Units, c.ChartType, c.Priority, c.Plugin, c.Module)
		wantDef := fmt.Sprintf("%s|%s|%s|%s|%s|%d|%s|%s", want.Context, want.Family, want.Title, want.Units, want.ChartType, want.Priority, want.Plugin, want.Module)
		if gotDef != wantDef {
			t.Errorf("%s definition\n got %s\nwant %s", id, gotDef, wantDef)
		}
		var gd [][2]string
		for _, d := range c.Dims {
			if !d.Hidden {
				gd = append(gd, [2]string{d.ID, d.Name})
			}
		}
		if hostDims[strings.SplitN(c.Context, ".", 2)[0]] {
			// dimensions are this host's process groups and users
		} else if everySource[c.Context] {
			if !subsequence(want.Dimensions, gd) {
				t.Errorf("%s dimensions: reference %v is not in order within\n%v", id, want.Dimensions, gd)
			}
		} else if fmt.Sprint(gd) != fmt.Sprint(want.Dimensions) {
			t.Errorf("%s dimensions\n got %v\nwant %v", id, gd, want.Dimensions)
		}
	}
	var missing []string
	for id, c := range ref {
		if _, ok := got[id]; !ok && fixtureModules[c.Module] && notOnFixture[id] == "" {
			missing = append(missing, id)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("reference charts not made from the fixture: %s", strings.Join(missing, " "))
	}
	t.Logf("%d charts, %d dimensions; %d match reference charts", len(got), dims, matched)
}
