package testutil

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// SmallDisk is a tmpfs of the given size ("4m") mounted on a fresh temp
// folder and unmounted at cleanup: a disk a test can fill. It skips the
// test, saying why, without root (mount needs it).
func SmallDisk(t testing.TB, size string) *Disk {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs (run the tests as root)")
	}
	dir, err := os.MkdirTemp("", "peerdns-disk-*")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		os.Remove(dir)
		t.Skipf("cannot mount a tmpfs (%v: %s): needs root and mount (apt-get install mount)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
		os.Remove(dir)
	})
	return &Disk{Dir: dir, t: t}
}

// Disk is a SmallDisk.
type Disk struct {
	Dir string
	t   testing.TB
}

// Fill writes a filler file until the disk is full and returns its size.
func (d *Disk) Fill() int64 {
	d.t.Helper()
	f, err := os.OpenFile(filepath.Join(d.Dir, ".filler"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				d.t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	// The last page may still take a few bytes: fill it to the byte.
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			break
		}
	}
	st, _ := f.Stat()
	return st.Size()
}

// Free removes the filler file.
func (d *Disk) Free() {
	d.t.Helper()
	if err := os.Remove(filepath.Join(d.Dir, ".filler")); err != nil {
		d.t.Fatal(err)
	}
}
