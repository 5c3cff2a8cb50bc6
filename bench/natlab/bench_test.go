//go:build linux

package natlab

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNATLabBench measures each scenario over NATLAB_TRIES runs (set it,
// e.g. 20, to run; bench/natlab/run.sh does): the share of runs whose
// pair connected by the wanted path, join→connected and tunnel first
// byte (median and worst), and how many connected directly within 3 s
// and by any path within 5 s. Scenarios run one after another, each try
// in a fresh lab; the introducer-survival check is left to TestNATLab.
func TestNATLabBench(t *testing.T) {
	tries, bin := benchSetup(t, "NATLAB_TRIES", "(e.g. 20) to run the NAT lab benchmark: bench/natlab/run.sh")
	for i, sc := range Scenarios {
		sc.StopIntroducer = false
		if only := os.Getenv("NATLAB_SCENARIOS"); only != "" && !slices.Contains(strings.Split(only, ","), sc.Name) {
			continue
		}
		var joins, vias, bytes []time.Duration
		wanted, within3, within5 := 0, 0, 0
		paths := map[string]int{}
		for try := 0; try < tries; try++ {
			prefix := fmt.Sprintf("%s-b%d%d", benchPrefix(), i, try%10)
			res, err := Run(bin, prefix, t.TempDir(), sc, func(string, ...any) {})
			if err != nil {
				t.Fatal(err)
			}
			// Counted by the first path, as the bound's figures always
			// were; a pair relayed first and punched later shows as
			// "relayed→punched".
			if res.FirstPath != res.Path {
				paths[res.FirstPath+"→"+res.Path]++
			} else {
				paths[res.Path]++
			}
			if !res.Connected {
				continue
			}
			joins = append(joins, res.JoinToConnected)
			if res.ViaToConnected > 0 {
				vias = append(vias, res.ViaToConnected)
			}
			if res.FirstByte > 0 {
				bytes = append(bytes, res.FirstByte)
			}
			if res.Err == nil && PathOK(sc.Want, res.FirstPath) {
				wanted++
				if res.JoinToConnected <= 3*time.Second && res.FirstPath != "relayed" && res.FirstPath != "tcp" {
					within3++
				}
			}
			if res.JoinToConnected <= 5*time.Second {
				within5++
			}
		}
		t.Logf("| %s | %d/%d | %d/%d | %d/%d | %s | %s | %s | %v |", sc.Name, wanted, tries, within3, tries, within5, tries,
			stat(joins), stat(vias), stat(bytes), paths)
	}
}

// stat is "median (max)" of ds, or "-" when empty.
func stat(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return fmt.Sprintf("%v (%v)", ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
}

// benchPrefix starts the benchmark's namespace names: NATLAB_PREFIX
// (short, so two people benchmarking on one machine keep apart) or "pra".
func benchPrefix() string {
	if p := os.Getenv("NATLAB_PREFIX"); p != "" {
		return p
	}
	return "pra"
}

// benchSetup starts a lab benchmark that runs only when asked: the
// count the variable env holds (the test is skipped, saying what to set
// and why, when it is unset or not positive), and the binary to run:
// NATLAB_BIN, or the tree's, built.
func benchSetup(t *testing.T, env, why string) (int, string) {
	t.Helper()
	n, _ := strconv.Atoi(os.Getenv(env))
	if n <= 0 {
		t.Skip("set " + env + " " + why)
	}
	if why := Available(); why != "" {
		t.Skip(why)
	}
	if bin := os.Getenv("NATLAB_BIN"); bin != "" {
		return n, bin
	}
	bin, err := Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return n, bin
}
