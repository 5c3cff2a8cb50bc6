//go:build linux

package agent

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"peerdns/agent/collect"
)

// releaseExecutablePages asks the kernel to reclaim the pages of this
// process's own executable that are mapped read-only (code and read-only
// data; never the writable data), with madvise(MADV_PAGEOUT), after
// marking them MADV_RANDOM. The pages the process still runs come back on
// their next use, read again from the page cache or the file. It returns
// the process's file-backed resident memory (RssFile, bytes) before and
// after.
//
// Why the agent does this: `peerdns agent` runs from the one binary that
// also carries the whole naming node. Go runs every linked package's
// initialiser at start, and the kernel maps 64 KiB around each page
// touched (fault-around), so start-up alone leaves ~18 MiB of code and
// tables resident, most of them the node's, in an agent that never runs
// them (Netdata's
// plugins are separate, small executables). Measured on the agent: RssFile
// 18.7 MiB → 2.2 MiB at the release, ~9.3 MiB two minutes later as the
// agent's own paths (collectors, tier-1 minutes, training, the API) fault
// in again (bench/README.md, "Memory: what the agent held that it did not
// need").
//
// MADV_PAGEOUT needs Linux 5.4; the kernel applies it to file pages only
// when the process could open the file for writing (its owner, or root),
// and skips pages that other processes map too. Where it cannot, nothing
// changes and the caller logs why.
func releaseExecutablePages() (before, after int64, err error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, 0, fmt.Errorf("find own executable: %w", err)
	}
	ranges, err := readOnlyMappings("/proc/self/maps", exe)
	if err != nil {
		return 0, 0, err
	}
	if len(ranges) == 0 {
		return 0, 0, fmt.Errorf("no read-only mapping of %s in /proc/self/maps", exe)
	}
	before, _ = rssFile()
	for _, r := range ranges {
		// MADV_RANDOM first: the pages that come back come back one by
		// one instead of with their neighbours (measured: 9.3 MiB of
		// RssFile two minutes after the release with it, 12.0 without).
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r[0], r[1]-r[0], unix.MADV_RANDOM); errno != 0 {
			return before, before, fmt.Errorf("madvise(MADV_RANDOM) %#x-%#x: %w", r[0], r[1], errno)
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r[0], r[1]-r[0], unix.MADV_PAGEOUT); errno != 0 {
			return before, before, fmt.Errorf("madvise(MADV_PAGEOUT) %#x-%#x: %w", r[0], r[1], errno)
		}
	}
	after, _ = rssFile()
	return before, after, nil
}

// readOnlyMappings lists [start, end) of the mappings of file path in a
// /proc/<pid>/maps file whose permissions have no 'w'.
func readOnlyMappings(maps, path string) ([][2]uintptr, error) {
	f, err := os.Open(maps)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][2]uintptr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode pathname (the path may hold spaces)
		fields := bytes.Fields(sc.Bytes())
		if len(fields) < 6 || bytes.IndexByte(fields[1], 'w') >= 0 {
			continue
		}
		if p := string(bytes.Join(fields[5:], []byte(" "))); p != path {
			continue
		}
		lo, hi, ok := strings.Cut(string(fields[0]), "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || b <= a {
			continue
		}
		out = append(out, [2]uintptr{uintptr(a), uintptr(b)})
	}
	return out, sc.Err()
}

// rssFile is RssFile of /proc/self/status in bytes.
func rssFile() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	return int64(collect.StatusKiB(b, "RssFile:")) << 10, nil
}
