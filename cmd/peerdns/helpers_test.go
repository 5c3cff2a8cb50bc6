package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary act as the peerdns command, so the kill -9
// and signal tests run a real node process without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("PEERDNS_TEST_AS_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
	}
	if os.Getenv("PEERDNS_TEST_CLIENT") == "1" {
		os.Exit(testClient(os.Args[1:]))
	}
	os.Exit(m.Run())
}
