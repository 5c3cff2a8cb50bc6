package h2srv

import (
	"errors"
	"io"
)

// errContinuationFlood ends a connection whose header block spans more
// frames than contGuard allows.
var errContinuationFlood = errors.New("http2: a header block in too many CONTINUATION frames")

// contGuard sits between a connection's buffered reader and its Framer
// and follows the frame boundaries in the bytes the Framer reads, to
// count the CONTINUATION frames of a header block. The Framer joins
// them to their HEADERS frame inside one ReadFrame and bounds the header
// block's bytes, but not its frames: empty CONTINUATION frames cost it a
// frame's work each and add nothing, so without a count a client could
// keep the reader busy with them until the idle timeout (the
// CVE-2024-27316 family). A header block may take at most limit frames
// after its HEADERS; past that Read fails with errContinuationFlood.
type contGuard struct {
	r     io.Reader
	limit int
	left  int     // payload bytes of the current frame not yet read
	hdr   [9]byte // the frame header being read
	nh    int     // bytes of it read so far
	run   int     // CONTINUATION frames since the last other frame
	err   error
}

// contLimit is the frames a header block may take after its HEADERS: a
// header list at maxList bytes sent in frames of the smallest size a
// client may use (16 KiB), twice over as the Framer tolerates, plus
// nghttp2's default allowance (8).
func contLimit(maxList uint32) int {
	return 8 + 2*int(maxList)/minMaxFrameSize
}

func (g *contGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.r.Read(p)
	for b := p[:n]; len(b) > 0; {
		if g.left > 0 {
			k := min(g.left, len(b))
			g.left -= k
			b = b[k:]
			continue
		}
		k := copy(g.hdr[g.nh:], b)
		g.nh += k
		b = b[k:]
		if g.nh < len(g.hdr) {
			break
		}
		g.nh = 0
		g.left = int(g.hdr[0])<<16 | int(g.hdr[1])<<8 | int(g.hdr[2])
		if g.hdr[3] != frameContinuation {
			g.run = 0
			continue
		}
		if g.run++; g.run > g.limit {
			// The bytes read are dropped with the connection: ReadFull
			// would forget an error returned beside a full read.
			g.err = errContinuationFlood
			return 0, g.err
		}
	}
	return n, err
}

// lastType is the type of the last frame whose header went through g:
// after a ReadFrame, the frame it read (or failed on).
func (g *contGuard) lastType() byte { return g.hdr[3] }
