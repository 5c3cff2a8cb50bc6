package stats

import (
	"crypto/sha256"
	"os"
	"testing"
	"time"

	"github.com/shirou/gopsutil/v3/process"
)

// The process's CPU time, as the payload's cpuUsage is computed from,
// grows while the process works.
func TestCPUSecondsGrowsWithWork(t *testing.T) {
	p, err := process.NewProcess(int32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	start, ok := cpuSeconds(p)
	if !ok || start <= 0 {
		t.Fatalf("cpuSeconds() = %v, %v: want the CPU the process used so far", start, ok)
	}
	sum := sha256.Sum256(nil)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for range 10_000 {
			sum = sha256.Sum256(sum[:])
		}
		if now, _ := cpuSeconds(p); now-start >= 0.02 {
			return
		}
	}
	t.Fatalf("10 s of hashing did not add 20 ms of CPU time to cpuSeconds (started at %v)", start)
}
