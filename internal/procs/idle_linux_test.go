package procs

import (
	"fmt"
	"testing"
	"time"

	"github.com/shirou/gopsutil/v3/cpu"

	"peerdns/internal/testutil"
)

func TestParseStatIdle(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"cpu  4705 356 584 3699176 23060 0 277 0 0 0\ncpu0 1 2 3 4 5\n", (3699176 + 23060) * 10 * time.Millisecond, true},
		{"cpu 1 2 3 4 5", 90 * time.Millisecond, true},
		{"cpu  1 2 3 4\n", 0, false},                    // no iowait column
		{"cpu0 1 2 3 4 5\n", 0, false},                  // not the aggregate line
		{"cpu  1 2 x 4 5\n", 0, false},                  // not a number
		{"cpu  1 2 3 -4 5\n", 0, false},                 // nor this
		{"cpu  1 2 3 99999999999999999999 5", 0, false}, // more digits than a uint64 holds
		{"", 0, false},
	} {
		got, ok := parseStatIdle([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %v %v, want %v %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func FuzzParseStatIdle(f *testing.F) {
	f.Add([]byte("cpu  4705 356 584 3699176 23060 0 277 0 0 0\n"))
	f.Add([]byte("cpu 1 2 3 4"))
	f.Add([]byte("cpu 0 0 0 0 0922700000000"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, ok := parseStatIdle(b); ok && string(b[:4]) != "cpu " {
			t.Fatalf("read an idle time from %q, which is not the aggregate line", b)
		}
	})
}

// The hand-read idle time is gopsutil's within a few ticks, and reading
// it allocates nothing (outside race builds).
func TestMachineIdleAgreesWithGopsutil(t *testing.T) {
	machineIdle() // the file is open and read once: the next read must be fresh
	before, _ := cpu.Times(false)
	testutil.Eventually(t, 10*time.Second, func() error {
		if ts, _ := cpu.Times(false); len(ts) == 0 || len(before) == 0 || ts[0].Idle+ts[0].Iowait == before[0].Idle+before[0].Iowait {
			return fmt.Errorf("the machine's idle time has not moved")
		}
		return nil
	})
	ts, err := cpu.Times(false)
	if err != nil || len(ts) == 0 {
		t.Fatalf("gopsutil cpu.Times: %v", err)
	}
	idle, ok := machineIdle()
	if !ok {
		t.Fatal("/proc/stat not read")
	}
	ref := time.Duration((ts[0].Idle + ts[0].Iowait) * float64(time.Second))
	// Between the two reads each CPU may idle a few more ticks.
	if d := idle - ref; d < 0 || d > 500*time.Millisecond {
		t.Fatalf("idle %v, gopsutil %v", idle, ref)
	}
	if n := testing.AllocsPerRun(100, func() { machineIdle() }); n != 0 && !raceBuild {
		t.Fatalf("%v allocations per read", n)
	}
}
