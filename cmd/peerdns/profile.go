package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
)

// startProfile writes a CPU profile of this process to the file
// PEERDNS_CPUPROFILE names ("%p" becomes the pid, so several nodes can
// share the setting) until the returned stop is called, and at stop the
// allocations since start to the file PEERDNS_ALLOCPROFILE names (pprof's
// "allocs"; written before the node stops, so its in-use figures are the
// running node's live heap). For finding where a node spends its time,
// its garbage or its memory under a benchmark; off when the variables
// are unset.
func startProfile(getenv func(string) string) (stop func(), err error) {
	cpuPath, allocPath := profilePath(getenv("PEERDNS_CPUPROFILE")), profilePath(getenv("PEERDNS_ALLOCPROFILE"))
	stopCPU := func() {}
	if cpuPath != "" {
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

// profilePath is p with "%p" as this process's pid.
func profilePath(p string) string {
	return strings.ReplaceAll(p, "%p", strconv.Itoa(os.Getpid()))
}
