//go:build linux

package agent

import (
	"errors"
	"os"
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
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(exe, &fs); err == nil && fs.Type == unix.TMPFS_MAGIC {
		// tmpfs pages are shared memory: without swap the kernel keeps them.
		t.Skipf("the test binary %s is on tmpfs, whose pages MADV_PAGEOUT cannot drop without swap; set GOTMPDIR to a disk folder to run this test", exe)
	}
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
