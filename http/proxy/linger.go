package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A lingering close (movingDeadlines.Close) ends the sending side, then
// reads and drops what the client still sends until it closes too or
// lingerTime passes. Each costs a goroutine and a drain buffer for up to
// lingerTime, and a client decides how long: one that sends an
// oversized head or a body nobody reads, and then trickles, holds both
// for the whole time. So at most maxLingering connections linger at once
// (per process: the limit is on memory, whichever server the connections
// came from), each draining into a small buffer; past the limit a
// connection is closed at once, as it would be without lingering (its
// client may read a reset instead of the answer, the price of an edge
// under that many refusals at once). At the limit the drains hold about
// maxLingering × (lingerBufSize + a goroutine's 8 KiB) = 24 MiB.
//
// nginx bounds a lingering close by time only (lingering_time 30 s,
// lingering_timeout 5 s); here each drain blocks in its own read, so
// each needs a buffer of its own, and their number is what is bounded.

// lingerTime bounds a lingering close (nginx: lingering_time 30 s, and
// 5 s without data).
const lingerTime = 5 * time.Second

// maxLingering: connections lingering at once, at most (1,024; an
// atomic so a test can lower it while other servers' drains read it).
var maxLingering atomic.Int64

func init() { maxLingering.Store(1024) }

// lingerBufSize: a drain's reads. Small: a drain reads what a client
// sends after the answer, a few KiB usually, and a trickle at worst.
const lingerBufSize = 16 << 10

var (
	lingerCount atomic.Int64
	lingerBufs  = sync.Pool{New: func() any { b := make([]byte, lingerBufSize); return &b }}
)

// lingerClose ends c's sending side and drains it in the background
// before closing it; false (and c untouched) when c cannot half-close
// or maxLingering connections linger already: the caller closes it.
func lingerClose(c net.Conn) bool {
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		return false
	}
	if lingerCount.Add(1) > maxLingering.Load() {
		lingerCount.Add(-1)
		return false
	}
	if cw.CloseWrite() != nil {
		lingerCount.Add(-1)
		return false
	}
	go func() {
		defer lingerCount.Add(-1)
		_ = c.SetReadDeadline(time.Now().Add(lingerTime))
		bp := lingerBufs.Get().(*[]byte)
		for {
			if _, err := c.Read(*bp); err != nil {
				break
			}
		}
		lingerBufs.Put(bp)
		_ = c.Close()
	}()
	return true
}
