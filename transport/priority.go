package transport

import (
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
// sends non-incremental streams one after another (by stream id), so an
// answer goes out whole, packet after packet, and the next one after it.
// A stream that keeps writing past burstBytes without pausing for
// burstGap (a download, a bulk copy) goes back to round-robin for the
// rest of the burst, so it cannot hold the connection: quic-go alternates
// packets between the non-incremental queue and the round-robin one, so
// bulk streams still get half of the connection while short answers
// pass. A stream that pauses for burstGap or longer starts its next
// burst non-incremental again (a kept-alive connection's next answer).
//
// Nothing is sent for it: priorities are the sender's own scheduling
// (quic-go does not send RFC 9218's PRIORITY_UPDATE), so peers of any
// version are unaffected.
const (
	burstBytes = 256 << 10
	burstGap   = 2 * time.Millisecond
)

// sendOrder is a stream's burst state (used by its one writer).
type sendOrder struct {
	last        time.Duration // end of the last write, since monoStart
	burst       int64         // bytes written in this burst
	incremental bool          // the priority the stream has now
}

// monoStart is the instant sendOrder counts from (monotonic readings).
var monoStart = time.Now()

// before is called before a write of n bytes to st: it ends the burst
// after a pause, counts n and sets the stream's priority when it
// changes.
func (o *sendOrder) before(st *quic.Stream, n int) {
	now := time.Since(monoStart)
	if now-o.last >= burstGap {
		o.burst = 0
	}
	o.burst += int64(n)
	if inc := o.burst > burstBytes; inc != o.incremental {
		o.incremental = inc
		st.SetPriority(defaultUrgency, inc)
	}
}

// after records the end of a write.
func (o *sendOrder) after() { o.last = time.Since(monoStart) }

// defaultUrgency is quic-go's default urgency (RFC 9218's 3): only the
// incremental flag changes.
const defaultUrgency = 3
