package collect

import (
	"fmt"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"peerdns/agent/store"
)

// mountEntry is one line of /proc/self/mounts.
type mountEntry struct{ Device, Mountpoint, Fstype string }

// spaceUsage is what statfs(2) says of one mount, in bytes and inodes.
type spaceUsage struct {
	Total, Free, Used                   uint64 // Free: available to users (bavail)
	InodesTotal, InodesFree, InodesUsed uint64
	FSID                                uint64 // f_fsid: which filesystem answered
}

// readMounts parses /proc/self/mounts under root.
func readMounts(root string) ([]mountEntry, error) {
	b, err := os.ReadFile(root + "/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	var ms []mountEntry
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		dev, rest := firstField(line)
		mp, rest := firstField(rest)
		fs, _ := firstField(rest)
		if len(mp) == 0 || len(fs) == 0 {
			continue
		}
		ms = append(ms, mountEntry{Device: string(dev), Mountpoint: unescapeMount(string(mp)), Fstype: string(fs)})
	}
	return ms, nil
}

// statfser calls statfs(2) without allocating: syscall.Statfs copies the
// path into a new C string on every call (and gopsutil's disk.Usage
// allocates a result and strings too), so the C strings of the mount
// points are kept between calls.
type statfser struct{ paths map[string]*byte }

func (s *statfser) statfs(path string, u *spaceUsage) error {
	p := s.paths[path]
	if p == nil {
		var err error
		if p, err = syscall.BytePtrFromString(path); err != nil {
			return err
		}
		if len(s.paths) > 4*maxInstances {
			clear(s.paths) // mount churn: start over rather than grow
		}
		s.paths[path] = p
	}
	var st syscall.Statfs_t
	if _, _, errno := syscall.Syscall(syscall.SYS_STATFS, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&st)), 0); errno != 0 {
		return &os.PathError{Op: "statfs", Path: path, Err: errno}
	}
	statfsUsage(&st, u)
	return nil
}

// statfsUsage converts what statfs(2) said. Some FUSE and network
// filesystems report more free blocks or inodes than they have in all:
// nothing is used then, where the subtraction would wrap to 2^64.
func statfsUsage(st *syscall.Statfs_t, u *spaceUsage) {
	bs := uint64(st.Bsize)
	*u = spaceUsage{
		Total: st.Blocks * bs, Free: st.Bavail * bs, Used: subFloor(st.Blocks, st.Bfree) * bs,
		InodesTotal: st.Files, InodesFree: st.Ffree, InodesUsed: subFloor(st.Files, st.Ffree),
		FSID: uint64(uint32(st.Fsid.X__val[0]))<<32 | uint64(uint32(st.Fsid.X__val[1])),
	}
}

// subFloor is a-b, or 0 when b > a.
func subFloor(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// Netdata's diskspace.plugin defaults: mount points and filesystem types
// it leaves out ("exclude space metrics on paths/filesystems").
var (
	spaceSkipPaths = []string{"/proc/*", "/sys/*", "/var/run/user/*", "/run/user/*", "/snap/*", "/var/lib/docker/*"}
	spaceSkipFS    = []string{"*gvfs", "*gluster*", "*s3fs", "*ipfs", "*davfs2", "*httpfs", "*sshfs", "*gdfs", "*moosefs", "fusectl", "autofs"}
)

func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
		if strings.HasSuffix(p, "/*") && strings.HasPrefix(s, strings.TrimSuffix(p, "*")) {
			return true // path.Match's * stops at a slash; Netdata's does not
		}
	}
	return false
}

// spaceChartID is Netdata's chart id of a mount point: "/" → "disk_space._",
// "/dev/shm" → "disk_space._dev_shm".
func spaceChartID(mount string) string {
	b := []byte(mount)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '-' || ch == '_') {
			b[i] = '_'
		}
	}
	return "disk_space." + string(b)
}

// diskSpaceColl stores disk_space.<mount> in GiB (avail, used, reserved
// for root) and disk_inodes.<mount> (inodes) for every mounted filesystem
// with blocks, re-reading the mount table every rescanEvery and statfs(2)
// on each mount every second.
//
// statfs runs on a goroutine of its own (statfsWorker): on a hard-mounted
// network filesystem whose server is gone it does not return, and the
// round waits for it at most statfsBudget. Until it returns, the disk
// space charts get no points and the collector fails naming the mount;
// every other collector goes on (as in Netdata, whose diskspace.plugin is
// a thread of its own).
type diskSpaceColl struct {
	readMounts func() ([]mountEntry, error)
	usage      func(path string, u *spaceUsage) error

	w       *statfsWorker // nil until the first round, and after close
	mounts  []string
	scanned time.Time
	charts  map[string]*chart
	inodes  map[string]*chart
	fsids   map[string]uint64 // the filesystem at each mount point since the mount table was read
	raw     [3]float64
}

// statfsBudget is how long a round waits for the statfs calls.
const statfsBudget = 500 * time.Millisecond

// statfsWorker calls statfs on the mounts of a round, on its own
// goroutine. While a round is out (busy), mounts and res belong to it.
type statfsWorker struct {
	req    chan []string
	done   chan struct{}
	timer  *time.Timer
	busy   bool
	since  time.Time    // when the round that is out began
	at     atomic.Int32 // index of the mount being asked
	res    []statfsResult
	usage  func(path string, u *spaceUsage) error
	closed bool
}

type statfsResult struct {
	u   spaceUsage
	err error
}

func newStatfsWorker(usage func(string, *spaceUsage) error) *statfsWorker {
	w := &statfsWorker{req: make(chan []string), done: make(chan struct{}, 1), usage: usage, timer: time.NewTimer(time.Hour)}
	w.timer.Stop()
	go func() {
		for mounts := range w.req {
			for i, mp := range mounts {
				w.at.Store(int32(i))
				r := &w.res[i]
				r.err = w.usage(mp, &r.u)
			}
			w.done <- struct{}{}
		}
	}()
	return w
}

// round asks statfs of every mount, waiting at most statfsBudget; false
// with the mount that has not answered when the budget ran out, or when
// a round that ran out earlier has still not returned.
func (w *statfsWorker) round(mounts []string, now time.Time) (hung string, ok bool) {
	if w.busy {
		select {
		case <-w.done: // the late round came back: its results are stale
			w.busy = false
		default:
			return w.stuck(mounts), false
		}
	}
	if cap(w.res) < len(mounts) {
		w.res = make([]statfsResult, len(mounts))
	}
	w.res = w.res[:len(mounts)]
	w.busy, w.since = true, now
	w.req <- mounts
	w.timer.Reset(statfsBudget)
	select {
	case <-w.done:
		w.timer.Stop()
		w.busy = false
		return "", true
	case <-w.timer.C:
		return w.stuck(mounts), false
	}
}

func (w *statfsWorker) stuck(mounts []string) string {
	if i := int(w.at.Load()); i < len(mounts) {
		return mounts[i]
	}
	return "?"
}

// close ends the goroutine once its round, if any, returns.
func (w *statfsWorker) close() {
	if !w.closed {
		w.closed = true
		close(w.req)
	}
}

func (c *diskSpaceColl) close() {
	if c.w != nil {
		c.w.close()
		c.w = nil
	}
}

func newDiskSpace(root string) *diskSpaceColl {
	return &diskSpaceColl{
		readMounts: func() ([]mountEntry, error) { return readMounts(root) },
		usage:      (&statfser{paths: map[string]*byte{}}).statfs,
		charts:     map[string]*chart{},
		inodes:     map[string]*chart{},
		fsids:      map[string]uint64{},
	}
}

func (c *diskSpaceColl) name() string { return "diskspace" }

func (c *diskSpaceColl) collect(tk *tick) error {
	if c.w == nil {
		c.w = newStatfsWorker(c.usage)
	}
	if c.w.busy {
		// a statfs of an earlier round has not returned: c.mounts is
		// still the worker's
		if hung, ok := c.w.round(c.mounts, tk.now); !ok {
			return fmt.Errorf("statfs %s has not returned for %v (a hung network filesystem?)", hung, tk.now.Sub(c.w.since).Round(time.Second))
		}
		// it returned, and this round asked again
		return c.store(tk)
	}
	if c.mounts == nil || tk.now.Sub(c.scanned) >= rescanEvery {
		ms, err := c.readMounts()
		if err != nil {
			return fmt.Errorf("read mount table: %w", err)
		}
		c.scanned = tk.now
		c.mounts = c.mounts[:0]
		clear(c.fsids)
		seen := map[string]bool{}
		for _, m := range ms {
			if seen[m.Mountpoint] || matchAny(spaceSkipPaths, m.Mountpoint) || matchAny(spaceSkipFS, m.Fstype) {
				continue
			}
			seen[m.Mountpoint] = true
			if len(c.mounts) >= maxInstances {
				tk.capped("diskspace", "mounts")
				break
			}
			c.mounts = append(c.mounts, m.Mountpoint)
		}
		// unmounted since the last scan: the charts go
		for mp, ch := range c.charts {
			if !seen[mp] {
				tk.remove(ch.def)
				delete(c.charts, mp)
				if ic := c.inodes[mp]; ic != nil {
					tk.remove(ic.def)
					delete(c.inodes, mp)
				}
			}
		}
	}
	if hung, ok := c.w.round(c.mounts, tk.now); !ok {
		return fmt.Errorf("statfs %s has not returned within %v (a hung network filesystem?)", hung, statfsBudget)
	}
	return c.store(tk)
}

// store makes the charts of the round the worker just answered.
func (c *diskSpaceColl) store(tk *tick) error {
	ok := 0
	var lastErr error
	keep := c.mounts[:0]
	for i, mp := range c.mounts {
		u := &c.w.res[i].u
		if err := c.w.res[i].err; err != nil {
			lastErr = err
			keep = append(keep, mp)
			continue // e.g. permission denied on one mount: the others go on
		}
		ok++
		if u.Total == 0 {
			continue // proc, cgroup and the like have no blocks: skip until the next rescan
		}
		keep = append(keep, mp)
		// Unmounted since the mount table was read, the path is a folder
		// of the filesystem below: statfs answers for that one, which is
		// not this mount's to chart. No point until the next rescan says
		// whether it is gone. Filesystems without an fsid (0: FUSE, some
		// network ones) over one without are not told apart.
		if fsid, seen := c.fsids[mp]; !seen {
			c.fsids[mp] = u.FSID
		} else if fsid != u.FSID {
			continue
		}
		ch := c.charts[mp]
		if ch == nil {
			ch = newChart(&store.ChartDef{
				ID: spaceChartID(mp), Context: "disk.space", Family: mp, Title: "Disk Space Usage", Units: "GiB",
				ChartType: "stacked", Plugin: "diskspace.plugin", Module: "", Priority: 2023, UpdateEvery: 1,
				Dims: []store.DimDef{
					dim("avail", "", algAbsolute, 1, 1<<30), dim("used", "", algAbsolute, 1, 1<<30),
					dim("reserved_for_root", "reserved for root", algAbsolute, 1, 1<<30),
				},
			})
			c.charts[mp] = ch
		}
		// Free = bavail×bsize, Used = (blocks-bfree)×bsize; the rest of
		// Total is the part only root may use (bfree-bavail).
		reserved := float64(u.Total) - float64(u.Free) - float64(u.Used)
		c.raw = [3]float64{float64(u.Free), float64(u.Used), max(reserved, 0)}
		ch.emit(tk, c.raw[:])
		if u.InodesTotal > 0 {
			ic := c.inodes[mp]
			if ic == nil {
				ic = newChart(&store.ChartDef{
					ID: "disk_inodes." + strings.TrimPrefix(spaceChartID(mp), "disk_space."), Context: "disk.inodes",
					Family: mp, Title: "Disk Files (inodes) Usage", Units: "inodes", ChartType: "stacked",
					Plugin: "diskspace.plugin", Module: "", Priority: 2024, UpdateEvery: 1,
					Dims: []store.DimDef{
						dim("avail", "", algAbsolute, 1, 1), dim("used", "", algAbsolute, 1, 1),
						dim("reserved_for_root", "reserved for root", algAbsolute, 1, 1),
					},
				})
				c.inodes[mp] = ic
			}
			// Linux statfs has no f_favail: every free inode is available,
			// so nothing is reserved for root (Netdata shows 0 too).
			c.raw = [3]float64{float64(u.InodesFree), float64(u.InodesUsed), 0}
			ic.emit(tk, c.raw[:])
		}
	}
	c.mounts = keep
	if ok == 0 && lastErr != nil {
		return fmt.Errorf("statfs: %w", lastErr)
	}
	return nil
}
