package collect

import (
	"errors"
	"fmt"
	"syscall"

	"peerdns/agent/store"
)

// adjtimex(2) constants (include/uapi/linux/timex.h).
const (
	timeError = 5      // TIME_ERROR: the clock is not synchronised
	staUnsync = 0x0040 // STA_UNSYNC
	staNano   = 0x2000 // STA_NANO: offset in nanoseconds, not microseconds
)

// timexColl stores Netdata's timex.plugin charts from one adjtimex(2)
// call a second (read only: modes 0): system.clock_sync_state (1 when the
// kernel says the clock is synchronised), system.clock_status (the
// STA_UNSYNC flag and the TIME_ERROR state) and system.clock_sync_offset
// (the offset from the reference clock the NTP daemon last gave the
// kernel, in ms).
type timexColl struct {
	adjtimex              func(*syscall.Timex) (int, error)
	state, status, offset *chart
	tx                    syscall.Timex
	off                   bool // adjtimex is not allowed here
	raw                   [2]float64
}

func newTimex() *timexColl { return &timexColl{adjtimex: syscall.Adjtimex} }

func (c *timexColl) name() string { return "timex" }

func (c *timexColl) collect(tk *tick) error {
	c.tx = syscall.Timex{} // modes 0: read only
	if c.off {
		return nil
	}
	state, err := c.adjtimex(&c.tx)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOSYS) {
		// a sandbox (seccomp) that forbids even reading the clock state:
		// no source here, and no point asking every second
		c.off = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("adjtimex: %w", err)
	}
	if c.state == nil {
		mk := func(id, title, units string, prio int, dims ...store.DimDef) *chart {
			return newChart(&store.ChartDef{
				ID: id, Context: id, Family: "clock synchronization", Title: title, Units: units, ChartType: "line",
				Plugin: "timex.plugin", Priority: prio, UpdateEvery: 1, Dims: dims,
			})
		}
		c.state = mk("system.clock_sync_state", "System Clock Synchronization State", "state", 1100, dim("state", "", algAbsolute, 1, 1))
		c.status = mk("system.clock_status", "System Clock Status", "status", 1105,
			dim("unsync", "", algAbsolute, 1, 1), dim("clockerr", "", algAbsolute, 1, 1))
		c.offset = mk("system.clock_sync_offset", "Computed Time Offset Between Local System and Reference Clock", "milliseconds", 1110,
			dim("offset", "", algAbsolute, 1, 1))
	}
	synced, unsync, clockerr := 1.0, 0.0, 0.0
	if state == timeError {
		synced, clockerr = 0, 1
	}
	if c.tx.Status&staUnsync != 0 {
		unsync = 1
	}
	c.raw[0] = synced
	c.state.emit(tk, c.raw[:1])
	c.raw[0], c.raw[1] = unsync, clockerr
	c.status.emit(tk, c.raw[:2])
	off := float64(c.tx.Offset) / 1000 // µs → ms
	if c.tx.Status&staNano != 0 {
		off /= 1000
	}
	c.raw[0] = off
	c.offset.emit(tk, c.raw[:1])
	return nil
}
