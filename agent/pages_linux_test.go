//go:build linux

package agent

import (
	"errors"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadOnlyMappings(t *testing.T) {
	got, err := readOnlyMappings("testdata/maps.txt", "/opt/peer dns/bin/peerdns")
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]uintptr{{0x400000, 0xf29000}, {0xf29000, 0x1a85000}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("readOnlyMappings = %#x, want %#x (code and read-only data of that file only)", got, want)
	}
}

// TestReleaseExecutablePages releases the test binary's own pages: its
// file-backed resident memory goes down and the process keeps running
// (the pages it needs fault in again).
func TestReleaseExecutablePages(t *testing.T) {
	before, after, err := releaseExecutablePages()
	if errors.Is(err, unix.EINVAL) {
		t.Skipf("this kernel has no MADV_PAGEOUT (Linux 5.4 or later needed): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if before <= 0 || after >= before {
		t.Fatalf("RssFile before %d KiB, after %d KiB: nothing released", before>>10, after>>10)
	}
	t.Logf("RssFile %d KiB → %d KiB", before>>10, after>>10)
}
