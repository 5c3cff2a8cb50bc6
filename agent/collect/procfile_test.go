package collect

import (
	"bytes"
	"os"
	"syscall"
	"testing"
)

// A /proc file made record by record comes a seq_file buffer (about a
// page) per read: the reader must go on past the first short read, or a
// host with many disks, interfaces or CPUs loses the rows after the first
// page. /proc/self/maps is such a file; mapping regions that cannot merge
// (alternating protections) makes it several pages long.
func TestProcReaderReadsPastAPage(t *testing.T) {
	page := os.Getpagesize()
	var maps [][]byte
	defer func() {
		for _, m := range maps {
			_ = syscall.Munmap(m)
		}
	}()
	for i := 0; i < 300; i++ {
		prot := syscall.PROT_READ
		if i%2 == 1 {
			prot = syscall.PROT_NONE
		}
		m, err := syscall.Mmap(-1, 0, page, prot, syscall.MAP_PRIVATE|syscall.MAP_ANON)
		if err != nil {
			t.Fatal(err)
		}
		maps = append(maps, m)
	}
	r := newProcReader("/proc/self/maps")
	defer r.close()
	got, err := r.read()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 4*page {
		t.Fatalf("/proc/self/maps is %d bytes; the test needs it longer than a few pages", len(want))
	}
	// The two reads are a moment apart (the runtime may map memory in
	// between), so compare what both must hold: every region mapped above
	// and the same last line.
	lines := func(b []byte) int { return bytes.Count(b, []byte("\n")) }
	if lines(got) < len(maps) || lines(got) < lines(want)-8 {
		t.Fatalf("read %d lines (%d bytes); the file has %d lines (%d bytes)", lines(got), len(got), lines(want), len(want))
	}
	last := func(b []byte) []byte {
		b = bytes.TrimSuffix(b, []byte("\n"))
		return b[bytes.LastIndexByte(b, '\n')+1:]
	}
	if !bytes.Equal(last(got), last(want)) {
		t.Fatalf("last line %q, want %q", last(got), last(want))
	}
}

// A small file still comes in one read, and a second read gives the same
// bytes from offset 0.
func TestProcReaderSmallFileTwice(t *testing.T) {
	r := newProcReader("/proc/self/stat")
	defer r.close()
	a, err := r.read()
	if err != nil {
		t.Fatal(err)
	}
	first := append([]byte(nil), a[:bytes.IndexByte(a, ')')+1]...)
	b, err := r.read()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, first) || b[len(b)-1] != '\n' {
		t.Fatalf("second read %q, first began %q", b, first)
	}
}
