package transport

import (
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// Send order of a connection's streams. quic-go sends the streams of one
// urgency round-robin, a packet each, by default (RFC 9218's incremental
// streams). With many answers in flight at once on one peer connection
// (an edge proxying 32 keep-alive connections through one tunnel) every
// answer then takes as long as all of them together: each stream's data
// reaches the peer a packet at a time, interleaved with every other's,
// so the peer's reader wakes for a packet or two of each and writes each
// answer to its client in many small pieces (9 client writes per 64 KiB
// answer at the edge of the node that dialed, measured with perf), and
// the first answer is as late as the last.
//
// So a stream starts each burst of writes non-incremental: quic-go
// sends non-incremental streams one after another, so an answer goes out
// whole, packet after packet, and the next one after it. But quic-go
// picks among the non-incremental streams of one urgency by stream id,
// lowest first, not in the order they became ready: on a connection
// whose lower streams keep getting answers (kept-alive connections reuse
// their streams) a higher stream's answer waits for as long as they keep
// coming. Measured through a tunnel at 32 connections: 23% more 64 KiB
// answers a second at 16% less CPU each, but a p99 of 0.5-0.6 s and
// requests waiting over 2 s; turning a stream that waited round-robin
// again gave the gain back (measured). So waiting moves a stream up
// instead, which is first come, first served in steps:
//
//   - A burst starts at startUrgency, two below quic-go's default 3.
//   - A write of timedWrite or more that still waits after waitLimit
//     moves its stream one urgency up (quic-go serves a lower urgency
//     strictly first), up to topUrgency, which is quic-go's default (the
//     connection's control stream keeps it: control and data share the
//     top, neither holds the other back); one that waits there as long
//     turns round-robin for the rest of its burst, so no stream waits
//     behind lower ones for more than about three waitLimits and then a
//     share of the connection.
//   - What no write waits for goes round-robin at topUrgency: a short
//     write (quic-go keeps up to a packet of it and returns at once),
//     and what a long write leaves queued when it returns (quic-go
//     returns once all but the last packet's worth has gone). Nobody
//     would move those up, and behind lower streams that keep sending
//     they would wait for as long as those do (answers whose last bytes
//     came after over 2 s, measured without this rule).
//   - A stream that keeps writing past burstBytes without pausing for
//     burstGap (a download, a bulk copy) goes round-robin for the rest of
//     its burst at its urgency: quic-go alternates packets between the
//     non-incremental stream it picked and the round-robin ones of one
//     urgency, so bulk and answers share it; a bulk write that waits
//     moves up like any other, so answers moving up cannot hold it back
//     for good either.
//   - A pause of burstGap or longer starts the next burst afresh (a
//     kept-alive connection's next answer).
//
// Nothing is sent for it: priorities are the sender's own scheduling
// (quic-go does not send RFC 9218's PRIORITY_UPDATE), so peers of any
// version are unaffected.
const (
	burstBytes = 256 << 10
	burstGap   = 2 * time.Millisecond
	waitLimit  = 5 * time.Millisecond
	// timedWrite: writes this long or longer are watched for waitLimit
	// (a shorter one is a packet or three, gone at the next turn).
	timedWrite = 4 << 10

	defaultUrgency = 3 // quic-go's (RFC 9218's): the control stream's
	startUrgency   = defaultUrgency + 2
	topUrgency     = defaultUrgency
)

// sendOrder is a stream's burst state. One writer at a time uses it;
// the wait timer's function runs beside it, hence mu.
type sendOrder struct {
	st    *quic.Stream
	now   func() time.Duration // since monoStart (tests stop it)
	limit time.Duration        // waitLimit (tests lengthen it)

	mu          sync.Mutex
	last        time.Duration // end of the last write, since monoStart
	burst       int64         // bytes written in this burst
	level       int8          // the burst's urgency (startUrgency, moved up by waits)
	waitedTop   bool          // a write waited at topUrgency: round-robin for this burst
	timer       *time.Timer   // fires when a watched write waited waitLimit
	watched     bool          // a write the timer watches is under way
	urgency     int8          // the stream's urgency now
	incremental bool          // and whether it is round-robin
}

// monoStart is the instant sendOrder counts from (monotonic readings).
var monoStart = time.Now()

func sinceStart() time.Duration { return time.Since(monoStart) }

func newSendOrder(st *quic.Stream) *sendOrder {
	return &sendOrder{st: st, now: sinceStart, limit: waitLimit, urgency: defaultUrgency, incremental: true} // quic-go's defaults
}

// before is called before a write of n bytes: it starts a new burst
// after a pause, counts n, gives the stream the priority the write goes
// at and starts the wait timer for a long write.
func (o *sendOrder) before(n int) {
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if now-o.last >= burstGap || o.last == 0 {
		o.burst, o.level, o.waitedTop = 0, startUrgency, false
	}
	o.burst += int64(n)
	o.watched = n >= timedWrite
	if !o.watched {
		o.setLocked(topUrgency, true)
		return
	}
	o.setLocked(o.level, o.waitedTop || o.burst > burstBytes)
	if o.timer == nil {
		o.timer = time.AfterFunc(o.limit, o.waited)
	} else {
		o.timer.Reset(o.limit)
	}
}

// after records the end of a write; what it left queued goes
// round-robin at topUrgency.
func (o *sendOrder) after() {
	last := o.now()
	o.mu.Lock()
	if o.watched {
		o.timer.Stop()
		o.watched = false // a late timer finds no write to move
		o.setLocked(topUrgency, true)
	}
	o.last = last
	o.mu.Unlock()
}

// waited moves the stream up: its write waited waitLimit. The write
// still waits, so the timer watches it again, until the stream is at
// topUrgency and round-robin: then nothing is left to move, and a write
// that waits on (a peer that does not read) costs no timer.
func (o *sendOrder) waited() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.watched {
		return
	}
	switch {
	case o.level > topUrgency:
		o.level--
	case o.waitedTop:
		return
	default:
		o.waitedTop = true
	}
	o.setLocked(o.level, o.waitedTop || o.incremental)
	o.timer.Reset(o.limit)
}

// setLocked gives the stream urgency u and the incremental flag inc.
// o.mu held.
func (o *sendOrder) setLocked(u int8, inc bool) {
	if u != o.urgency || inc != o.incremental {
		o.urgency, o.incremental = u, inc
		o.st.SetPriority(u, inc)
	}
}
