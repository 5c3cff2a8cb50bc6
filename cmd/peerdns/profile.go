package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
)

// startProfile writes a CPU profile of this process to the file
// PEERDNS_CPUPROFILE names ("%p" becomes the pid, so several nodes can
// share the setting) until the returned stop is called. For finding where
// a node spends its time under a benchmark; off when the variable is
// unset.
func startProfile(getenv func(string) string) (stop func(), err error) {
	path := getenv("PEERDNS_CPUPROFILE")
	if path == "" {
		return func() {}, nil
	}
	path = strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid()))
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("PEERDNS_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("PEERDNS_CPUPROFILE: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
