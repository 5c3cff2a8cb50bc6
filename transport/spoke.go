package transport

import "time"

// Spoke reports, without waiting, whether the far side ended its data
// (a FIN) or reset the stream, or the connection under s ended, since s
// was last read; on a stream path (TCP or relayed) also whether bytes
// came (one may be taken). A pool of keep-alive connections over streams
// asks it before it sends a request on one it held idle, as it would
// look into an idle TCP socket: a request sent on a stream the far side
// had ended is lost, and one that is not sent twice (a POST) fails. The
// caller closes s when it reports true.
//
// It reads with a deadline already past, twice. A yamux stream (the
// stream paths) hands out what it holds, or its end, before it checks a
// deadline. quic-go's Read takes the next piece of the stream off its
// queue and then checks the deadline and fails, whatever the piece: an
// end that came alone is reported by the second Read; bytes are not
// (nor an end that came after them), and no call of quic-go's shows them
// without waiting. Reads that find nothing take nothing. s is left with
// the past read deadline: the caller puts back the one it wants. buf is
// where a byte that came may be read to: the caller's, kept with s, so
// a look allocates nothing.
//
// An in-memory stream (MemNetwork, tests) shows its end, not its bytes:
// its pipe checks the deadline before a waiting write.
func Spoke(s Stream, buf *[1]byte) bool {
	if s.SetReadDeadline(spokePast) != nil {
		return true
	}
	for range 2 {
		n, err := s.Read(buf[:])
		// A timeout, as both streams return it (not wrapped): errors.As
		// would allocate at every look.
		te, ok := err.(interface{ Timeout() bool })
		if n > 0 || err != nil && !(ok && te.Timeout()) {
			return true
		}
	}
	return false
}

// spokePast is Spoke's read deadline: one that has passed.
var spokePast = time.Unix(1, 0)
