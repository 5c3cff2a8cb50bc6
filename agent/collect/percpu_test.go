package collect

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"peerdns/agent/store"
	"peerdns/agent/store/storetest"
)

const irq1 = `           CPU0       CPU1       
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 41:       2134          0 PCI-MSIX-0000:00:04.0   1-edge      virtio3-rx
LOC:     312525     296863   Local timer interrupts
ERR:          0
`

func TestInterrupts(t *testing.T) {
	irq2 := strings.NewReplacer("2134", "2234", "312525", "312625", "296863", "296913").Replace(irq1)
	c := newInterrupts("")
	c.read = fileSeq(irq1, irq2)
	db := storetest.New(t, store.Config{})
	run(t, db, 2, c)
	checkDef(t, db, "system.interrupts", "system.interrupts", "interrupts", "interrupts/s", "stacked", 1000, "24", "41", "LOC", "ERR")
	checkDef(t, db, "cpu.cpu1_interrupts", "cpu.interrupts", "interrupts", "interrupts/s", "stacked", 1101, "24", "41", "LOC")
	checkPoints(t, db, "system.interrupts", [][]float64{{0, 100, 150, 0}})
	checkPoints(t, db, "cpu.cpu0_interrupts", [][]float64{{0, 100, 100}})
	checkPoints(t, db, "cpu.cpu1_interrupts", [][]float64{{0, 0, 50}})
	def, _ := db.Chart("system.interrupts")
	if def.Dims[1].Name != "virtio3-rx_41" || def.Dims[0].Name != "Ged_24" || def.Dims[2].Name != "LOC" {
		t.Errorf("names %v", def.Dims)
	}
}

func TestInterruptsCPUOfflineAndBack(t *testing.T) {
	one := "     CPU0\n 24: 5 IO-APIC x\nLOC: 10 Local timer\n"
	c := newInterrupts("")
	c.read = fileSeq(irq1, irq1, one, one, irq1, irq1)
	db := storetest.New(t, store.Config{})
	m := run(t, db, 4, c)
	if _, ok := db.Chart("cpu.cpu1_interrupts"); ok {
		t.Fatal("cpu.cpu1_interrupts listed while CPU1 is offline")
	}
	// counters went down for CPU0 (fewer sources summed): a gap, never negative
	for _, row := range points(t, db, "system.interrupts") {
		for _, v := range row {
			if v < 0 {
				t.Fatalf("negative rate %v", row)
			}
		}
	}
	for s := 4; s < 6; s++ {
		now := epoch.Add(time.Duration(s) * time.Second)
		m.Collect(now.Unix(), now)
	}
	checkPoints(t, db, "cpu.cpu1_interrupts", [][]float64{{0, 0, 0}})
}

// TestInterruptsSourceReplaced: when one source goes and another comes
// between two reads, each source's rate is taken against its own
// previous count, never against the one that stood at its position.
func TestInterruptsSourceReplaced(t *testing.T) {
	before := "      CPU0\n 24: 1 IO-APIC a\n 40: 100 PCI-MSI b\n 41: 2134 PCI-MSI c\nLOC: 1000 Local timer\n"
	after := "      CPU0\n 24: 1 IO-APIC a\n 41: 2234 PCI-MSI c\n 43: 7 PCI-MSI d\nLOC: 1050 Local timer\n"
	c := newInterrupts("")
	c.read = fileSeq(before, after)
	db := storetest.New(t, store.Config{})
	run(t, db, 2, c)
	checkDef(t, db, "system.interrupts", "system.interrupts", "interrupts", "interrupts/s", "stacked", 1000, "24", "41", "43", "LOC")
	nan := math.NaN()
	checkPoints(t, db, "system.interrupts", [][]float64{{0, 100, nan, 50}})
}

// TestInterruptsCPUBackNoSpike: a CPU that comes back online brings back
// its column with every interrupt it counted before going offline; the
// system chart's sums over the CPUs then give a gap for that second, not
// the returning CPU's whole count as one second's rate.
func TestInterruptsCPUBackNoSpike(t *testing.T) {
	both := func(a, b int) string {
		return fmt.Sprintf("      CPU0  CPU1\n 24: %d 500\nLOC: %d 9000\n", a, b)
	}
	c := newInterrupts("")
	c.read = fileSeq(both(10, 1000), "      CPU0\n 24: 11\nLOC: 1010\n", both(12, 1020), both(13, 1030))
	db := storetest.New(t, store.Config{})
	run(t, db, 4, c)
	got := points(t, db, "system.interrupts")
	for _, row := range got {
		if row[0] > 1 || row[1] > 10 {
			t.Fatalf("points %v: a spike when CPU1 came back (true rates 1 and 10)", got)
		}
	}
	if len(got) == 0 || got[len(got)-1][0] != 1 || got[len(got)-1][1] != 10 {
		t.Errorf("points %v, want the last one [1 10]", got)
	}
}

func TestPerCPUMalformed(t *testing.T) {
	var tab perCPUTable
	for _, in := range []string{"", "garbage\n", "CPU0 CPUx\n 1: 2\n", "CPU0\nno colon here\n"} {
		if err := tab.parse([]byte(in), irqName); err == nil {
			t.Errorf("parse(%q) = nil error", in)
		}
	}
	if err := tab.parse([]byte("CPU0 CPU1\n 1: x y dev\n 2: 3 4 dev\n"), irqName); err != nil || len(tab.rows) != 1 || tab.rows[0].total != 7 {
		t.Errorf("a bad line must be skipped, the others kept: err %v rows %+v", err, tab.rows)
	}
}

func TestSoftirqsFixture(t *testing.T) {
	c := newSoftirqs("testdata/linux-6.18")
	db := storetest.New(t, store.Config{})
	run(t, db, 2, c)
	checkPoints(t, db, "system.softirqs", [][]float64{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}})
	checkDef(t, db, "cpu.cpu0_softirqs", "cpu.softirqs", "softirqs", "softirqs/s", "stacked", 3000,
		"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU")
}

func TestSoftnetKernels(t *testing.T) {
	// linux 2.6.32: 9 columns, no received_rps or flow_limit_count
	old1 := "00000010 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000000\n"
	old2 := "00000020 00000001 00000003 00000000 00000000 00000000 00000000 00000000 00000000\n"
	c := newSoftnet("")
	c.read = fileSeq(old1, old2)
	db := storetest.New(t, store.Config{})
	run(t, db, 2, c)
	checkPoints(t, db, "cpu.cpu0_softnet_stat", [][]float64{{16, 0, 1, 0, 0}})
	checkPoints(t, db, "system.softnet_stat", [][]float64{{16, 0, 1, 0, 0}})

	c2 := newSoftnet("testdata/linux-6.18")
	db2 := storetest.New(t, store.Config{})
	run(t, db2, 2, c2)
	checkDef(t, db2, "cpu.cpu1_softnet_stat", "cpu.softnet_stat", "softnet_stat", "events/s", "line", 4102,
		"processed", "dropped", "squeezed", "received_rps", "flow_limit_count")
	if _, err := os.Stat("testdata/linux-6.18/proc/net/softnet_stat"); err != nil {
		t.Fatal(err)
	}
}

func FuzzPerCPUTable(f *testing.F) {
	seed, _ := os.ReadFile("testdata/linux-6.18/proc/interrupts")
	f.Add(seed)
	f.Add([]byte(irq1))
	f.Add([]byte("CPU0\n:\n1:\n"))
	var tab perCPUTable
	f.Fuzz(func(t *testing.T, b []byte) {
		if tab.parse(b, irqName) == nil {
			for _, r := range tab.rows {
				if len(r.vals) > len(tab.cpus) || math.IsNaN(r.total) {
					t.Fatalf("row %+v with %d cpus", r, len(tab.cpus))
				}
			}
		}
	})
}

func FuzzParseSoftnet(f *testing.F) {
	seed, _ := os.ReadFile("testdata/linux-6.18/proc/net/softnet_stat")
	f.Add(seed)
	f.Add([]byte("1 2 3 4 5 6 7 8 9\n"))
	f.Add([]byte("zz 2 3 4 5 6 7 8 9 10 11\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = parseSoftnet(nil, nil, b)
	})
}
