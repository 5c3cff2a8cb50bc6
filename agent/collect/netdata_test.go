package collect

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"peerdns/agent/store"
	"peerdns/agent/store/storetest"
)

// TestDefsMatchNetdata runs every collector on fake readers shaped like the
// reference VM (two CPUs, disk vda mounted at /, eth0, / and /dev/shm) and
// compares each chart definition with the one Netdata 1.37 published
// there (testdata/netdata137_charts.json, extracted from the reference
// api_v1_charts.json): context, family, title, units, chart type,
// priority, plugin, module and the visible dimensions' ids and names.
func TestDefsMatchNetdata(t *testing.T) {
	ref := refCharts(t, "testdata/netdata137_charts.json")
	// The loop below checks only the charts the file lists: make sure it
	// lists them all.
	if len(ref.Charts) != 20 {
		t.Fatalf("%d reference charts decoded, want 20", len(ref.Charts))
	}

	tickN := 0
	st := newStat("")
	st.read = func() ([]byte, error) {
		tickN++
		f := tickN * 100
		return []byte(fmt.Sprintf("cpu  %d 0 0 %d 0 0 0 0 0 0\ncpu0 %d 0 0 %d 0 0 0 0 0 0\ncpu1 %d 0 0 %d 0 0 0 0 0 0\n%s",
			2*f, 2*f, f, f, f, f, procStat1)), nil
	}
	l := newLoad("testdata/linux-6.18")
	d := newDisk("testdata/linux-6.18")
	mounts := func() ([]mountEntry, error) {
		return []mountEntry{{Device: "/dev/vda", Mountpoint: "/", Fstype: "ext4"}, {Device: "tmpfs", Mountpoint: "/dev/shm", Fstype: "tmpfs"}}, nil
	}
	ds := newDiskSpace("")
	ds.readMounts = mounts
	ds.usage = func(_ string, u *spaceUsage) error {
		*u = spaceUsage{Total: 1 << 30, Free: 1 << 29, Used: 1 << 28, InodesTotal: 10, InodesFree: 5, InodesUsed: 5}
		return nil
	}
	n := newNet("testdata/linux-6.18")
	n.read = func() ([]byte, error) {
		return []byte(fmt.Sprintf(netDev, 1, tickN*1000, tickN, 0, tickN*500, tickN, 0)), nil
	}
	n.isVirtual = func(iface string) bool { return iface != "eth0" }
	u := newUptime("testdata/linux-6.18")
	e := newEntropy("")
	e.read = func() ([]byte, error) { return []byte("256"), nil }

	db := storetest.New(t, store.Config{})
	run(t, db, 2, st, l, d, ds, n, u, e)

	for id, want := range ref.Charts {
		t.Run(id, func(t *testing.T) {
			got, ok := db.Chart(id)
			if !ok {
				t.Fatalf("chart %s not registered", id)
			}
			gotDef := fmt.Sprintf("%s|%s|%s|%s|%s|%d|%s|%s", got.Context, got.Family, got.Title, got.Units, got.ChartType, got.Priority, got.Plugin, got.Module)
			wantDef := fmt.Sprintf("%s|%s|%s|%s|%s|%d|%s|%s", want.Context, want.Family, want.Title, want.Units, want.ChartType, want.Priority, want.Plugin, want.Module)
			if gotDef != wantDef {
				t.Errorf("definition\n got %s\nwant %s", gotDef, wantDef)
			}
			var dims [][2]string
			for _, dd := range got.Dims {
				if !dd.Hidden {
					dims = append(dims, [2]string{dd.ID, dd.Name})
				}
			}
			if fmt.Sprint(dims) != fmt.Sprint(want.Dimensions) {
				t.Errorf("dimensions\n got %v\nwant %v", dims, want.Dimensions)
			}
		})
	}
}

// refFile is a fixture of chart definitions extracted from Netdata's
// /api/v1/charts (titles without their " (id)" suffix).
type refFile struct {
	Charts map[string]struct {
		Context, Family, Title, Units string
		ChartType                     string `json:"chart_type"`
		Priority                      int
		Plugin, Module                string
		Dimensions                    [][2]string // id, name
	}
}

func refCharts(t *testing.T, path string) refFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ref refFile
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	return ref
}
