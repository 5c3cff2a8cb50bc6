package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// startProfile writes a CPU profile of this process to the file
// PEERDNS_CPUPROFILE names ("%p" becomes the pid, so several nodes can
// share the setting) until the returned stop is called, and at stop the
// allocations since start to the file PEERDNS_ALLOCPROFILE names (pprof's
// "allocs"; written before the node stops, so its in-use figures are the
// running node's live heap). For finding where a node spends its time,
// its garbage or its memory under a benchmark; off when the variables
// are unset. With PEERDNS_CPUPROFILE_WINDOW=signals the CPU profile
// covers only what a harness marks: it starts at SIGUSR1 and is written
// at SIGUSR2 (or at stop), so one step of a long run (a burst among
// joins and idle minutes) can be profiled alone.
func startProfile(getenv func(string) string) (stop func(), err error) {
	cpuPath, allocPath := profilePath(getenv("PEERDNS_CPUPROFILE")), profilePath(getenv("PEERDNS_ALLOCPROFILE"))
	stopCPU := func() {}
	if cpuPath != "" && getenv("PEERDNS_CPUPROFILE_WINDOW") == "signals" {
		stopCPU = profileWindow(cpuPath)
	} else if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err != nil {
			return nil, fmt.Errorf("PEERDNS_CPUPROFILE: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("PEERDNS_CPUPROFILE: %w", err)
		}
		stopCPU = func() {
			pprof.StopCPUProfile()
			f.Close()
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			stopCPU()
			if allocPath == "" {
				return
			}
			// A collection first, so the profile's in-use figures are
			// the live heap of this moment (they are as of the last
			// collection), as go test -memprofile does.
			runtime.GC()
			if f, err := os.Create(allocPath); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		})
	}, nil
}

// profileWindow profiles from SIGUSR1 to SIGUSR2 into path; the stop it
// returns ends a window still open and the signal handling.
func profileWindow(path string) (stop func()) {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	done := make(chan struct{})
	var f *os.File
	end := func() {
		if f != nil {
			pprof.StopCPUProfile()
			f.Close()
			f = nil
		}
	}
	go func() {
		defer close(done)
		for s := range sig {
			switch {
			case s == syscall.SIGUSR1 && f == nil:
				nf, err := os.Create(path)
				if err != nil {
					fmt.Fprintln(os.Stderr, "PEERDNS_CPUPROFILE:", err)
					continue
				}
				if err := pprof.StartCPUProfile(nf); err != nil {
					fmt.Fprintln(os.Stderr, "PEERDNS_CPUPROFILE:", err)
					nf.Close()
					continue
				}
				f = nf
			case s == syscall.SIGUSR2:
				end()
			}
		}
		end()
	}()
	return func() {
		signal.Stop(sig)
		close(sig)
		<-done
	}
}

// profilePath is p with "%p" as this process's pid.
func profilePath(p string) string {
	return strings.ReplaceAll(p, "%p", strconv.Itoa(os.Getpid()))
}
