package procs

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestMain lets the test binary stand in for the node's start: with
// PROCS_TEST_EXEC set it calls ExecWithSysmonAwake and prints the GODEBUG
// it then runs with (a process's environment changes only by exec).
func TestMain(m *testing.M) {
	if os.Getenv("PROCS_TEST_EXEC") == "1" {
		if err := ExecWithSysmonAwake(); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Printf("GODEBUG=%s awake=%v\n", os.Getenv("GODEBUG"), SysmonAwake(os.Getenv))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestSysmonEnv(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/h"}
	for _, c := range []struct {
		debug string // "-": no GODEBUG at all
		want  string // GODEBUG after; "" for environ unchanged
	}{
		{"-", SysmonTrace},
		{"", SysmonTrace},
		{"madvdontneed=1", "madvdontneed=1," + SysmonTrace},
		{"schedtrace=0", ""},
		{"gctrace=1, schedtrace=1000", ""},
		{SysmonTrace, ""},
	} {
		env := slices.Clone(base)
		if c.debug != "-" {
			env = append(env, "GODEBUG="+c.debug)
		}
		got, added := SysmonEnv(env)
		if c.want == "" {
			if added || !slices.Equal(got, env) {
				t.Errorf("GODEBUG %q: changed to %v; want it kept", c.debug, got)
			}
			continue
		}
		if !added || !slices.Contains(got, "GODEBUG="+c.want) || len(got) != len(base)+1 || !slices.Contains(got, "PATH=/bin") {
			t.Errorf("GODEBUG %q: environ %v; want the rest kept and GODEBUG=%s", c.debug, got, c.want)
		}
	}
}

// TestExecWithSysmonAwake runs the test binary as a node would start:
// it replaces itself once with the setting added, keeps other GODEBUG
// values, and leaves an operator's schedtrace alone.
func TestExecWithSysmonAwake(t *testing.T) {
	if execve == nil {
		t.Skip("no exec on this platform: the node keeps Go's default sysmon")
	}
	for _, c := range []struct{ debug, want string }{
		{"", "GODEBUG=" + SysmonTrace + " awake=true"},
		{"madvdontneed=1", "GODEBUG=madvdontneed=1," + SysmonTrace + " awake=true"},
		{"schedtrace=0", "GODEBUG=schedtrace=0 awake=false"},
		{"schedtrace=60000", "GODEBUG=schedtrace=60000 awake=true"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "PROCS_TEST_EXEC=1", "GODEBUG="+c.debug)
		// stdout only: on a machine up for more than 24.8 days the
		// runtime writes a SCHED line to stderr (SysmonTrace).
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GODEBUG %q: %v: %s%s", c.debug, err, out, stderr.String())
		}
		if got := strings.TrimSpace(string(out)); got != c.want {
			t.Errorf("GODEBUG %q: the process ran with %q, want %q", c.debug, got, c.want)
		}
	}
}
