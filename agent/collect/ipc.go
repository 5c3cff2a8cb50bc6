package collect

import (
	"errors"
	"fmt"
	"io/fs"

	"peerdns/agent/store"
)

// ipcColl stores Netdata's System V IPC charts (module "ipc"):
// system.ipc_semaphores and system.ipc_semaphore_arrays from
// /proc/sysvipc/sem (a line per array, nsems in column 4), and
// system.shared_memory_segments and system.shared_memory_bytes from
// /proc/sysvipc/shm (a line per segment, size in column 4). Netdata asks
// semctl(SEM_INFO) for the semaphore counts; the /proc tables give the
// same numbers without cgo. Netdata's per-queue message charts
// (system.message_queue_*) have a dimension per queue; this host and the
// reference host have none, and they are not built.
type ipcColl struct {
	readSem, readShm func() ([]byte, error)
	done             []func()
	sems, arrays     *chart
	segs, bytes      *chart
	fs               [][]byte
	raw              [1]float64
}

func newIPC(root string) *ipcColl {
	sem := newProcReader(root + "/proc/sysvipc/sem")
	shm := newProcReader(root + "/proc/sysvipc/shm")
	return &ipcColl{readSem: sem.read, readShm: shm.read, done: []func(){sem.close, shm.close}}
}

func (c *ipcColl) name() string { return "ipc" }

func (c *ipcColl) close() {
	for _, d := range c.done {
		d()
	}
}

// sumColumn counts the table's rows (after the header) and sums column col.
func (c *ipcColl) sumColumn(b []byte, col int) (rows, sum float64) {
	_, b = nextLine(b)
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		c.fs = fields(c.fs[:0], line)
		if len(c.fs) <= col {
			continue
		}
		v, ok := parseNum(c.fs[col])
		if !ok {
			continue
		}
		rows++
		sum += v
	}
	return rows, sum
}

func (c *ipcColl) collect(tk *tick) error {
	if c.sems == nil {
		mk := func(id, family, title, units, chartType string, prio int, d string) *chart {
			return newChart(&store.ChartDef{
				ID: id, Context: id, Family: family, Title: title, Units: units, ChartType: chartType,
				Plugin: "proc.plugin", Module: "ipc", Priority: prio, UpdateEvery: 1,
				Dims: []store.DimDef{dim(d, "", algAbsolute, 1, 1)},
			})
		}
		c.sems = mk("system.ipc_semaphores", "ipc semaphores", "IPC Semaphores", "semaphores", "area", 1203, "semaphores")
		c.arrays = mk("system.ipc_semaphore_arrays", "ipc semaphores", "IPC Semaphore Arrays", "arrays", "area", 1204, "arrays")
		c.segs = mk("system.shared_memory_segments", "ipc shared memory", "IPC Shared Memory Number of Segments", "segments", "stacked", 1205, "segments")
		c.bytes = mk("system.shared_memory_bytes", "ipc shared memory", "IPC Shared Memory Used Bytes", "bytes", "stacked", 1206, "bytes")
	}
	semB, err1 := c.readSem()
	if err1 == nil {
		arrays, sems := c.sumColumn(semB, 3)
		c.raw[0] = sems
		c.sems.emit(tk, c.raw[:])
		c.raw[0] = arrays
		c.arrays.emit(tk, c.raw[:])
	}
	shmB, err2 := c.readShm()
	if err2 == nil {
		segs, size := c.sumColumn(shmB, 3)
		c.raw[0] = segs
		c.segs.emit(tk, c.raw[:])
		c.raw[0] = size
		c.bytes.emit(tk, c.raw[:])
	}
	if err1 != nil && err2 != nil {
		if errors.Is(err1, fs.ErrNotExist) && errors.Is(err2, fs.ErrNotExist) {
			return nil // a kernel without System V IPC: no source
		}
		return fmt.Errorf("read /proc/sysvipc: %w", err1)
	}
	return nil
}
