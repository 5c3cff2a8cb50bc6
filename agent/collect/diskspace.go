package collect

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/shirou/gopsutil/v3/disk"

	"peerdns/agent/store"
)

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
type diskSpaceColl struct {
	readMounts func() ([]disk.PartitionStat, error)
	usage      func(path string) (*disk.UsageStat, error)

	mounts  []string
	scanned time.Time
	charts  map[string]*chart
	inodes  map[string]*chart
	raw     [3]float64
}

func newDiskSpace() *diskSpaceColl {
	return &diskSpaceColl{
		readMounts: func() ([]disk.PartitionStat, error) { return disk.Partitions(true) },
		usage:      disk.Usage,
		charts:     map[string]*chart{},
		inodes:     map[string]*chart{},
	}
}

func (c *diskSpaceColl) name() string { return "diskspace" }

func (c *diskSpaceColl) collect(tk *tick) error {
	if c.mounts == nil || tk.now.Sub(c.scanned) >= rescanEvery {
		ms, err := c.readMounts()
		if err != nil {
			return fmt.Errorf("read mount table: %w", err)
		}
		c.scanned = tk.now
		c.mounts = c.mounts[:0]
		seen := map[string]bool{}
		for _, m := range ms {
			if seen[m.Mountpoint] || matchAny(spaceSkipPaths, m.Mountpoint) || matchAny(spaceSkipFS, m.Fstype) {
				continue
			}
			seen[m.Mountpoint] = true
			c.mounts = append(c.mounts, m.Mountpoint)
		}
	}
	ok := 0
	var lastErr error
	keep := c.mounts[:0]
	for _, mp := range c.mounts {
		u, err := c.usage(mp)
		if err != nil {
			lastErr = err
			keep = append(keep, mp)
			continue // e.g. permission denied on one mount: the others go on
		}
		ok++
		if u.Total == 0 {
			continue // proc, cgroup and the like have no blocks: skip until the next rescan
		}
		keep = append(keep, mp)
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
		// gopsutil: Free = bavail×bsize, Used = (blocks-bfree)×bsize; the
		// rest of Total is the part only root may use (bfree-bavail).
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
