package tunnel

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"peerdns/messages"
	"peerdns/transport"
)

// copyBufSize is the size of a pooled copy buffer: large enough that a
// bulk transfer moves a full TCP window or a run of QUIC frames per call,
// and that an HTTP answer of 64 KiB goes from the target into the stream
// in one read and one write with its head (4 KiB of room for it): with
// 64 KiB exactly, the last few hundred bytes of such an answer took a
// read, a stream write and often a packet of their own.
const copyBufSize = 68 << 10

// bufPool holds copy buffers. A buffer has one owner (the copying
// goroutine) between Get and Put.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, copyBufSize)
	return &b
}}

// stats are a server's or client's counters. Updated from the data path
// with atomics; read by the supervisor for listings.
type stats struct {
	open, total atomic.Int64
	in, out     atomic.Int64 // in: network → local side; out: local → network
	lastErr     atomic.Pointer[string]
}

func (s *stats) fail(msg string) { s.lastErr.Store(&msg) }

func (s *stats) counters() messages.TunnelCounters {
	c := messages.TunnelCounters{
		ConnectionsOpen: s.open.Load(), ConnectionsTotal: s.total.Load(),
		BytesIn: s.in.Load(), BytesOut: s.out.Load(),
	}
	if e := s.lastErr.Load(); e != nil {
		c.LastError = *e
	}
	return c
}

// side is one end a tunnel connection copies between: the local TCP
// connection or the peer stream.
type side interface {
	io.Reader
	io.Writer
	closeWrite() error // no more bytes from us; errNoHalfClose when impossible
	close()            // both directions ended normally
	abort()            // tear down now
	// gone is closed once the side can carry nothing more, whatever
	// its reads and writes wait for: a stream's peer connection closed.
	// nil for a local connection.
	gone() <-chan struct{}
}

type tcpSide struct{ c net.Conn }

func (t tcpSide) Read(b []byte) (int, error)  { return t.c.Read(b) }
func (t tcpSide) Write(b []byte) (int, error) { return t.c.Write(b) }
func (t tcpSide) close()                      { _ = t.c.Close() }
func (t tcpSide) abort()                      { tcpAbort(t.c) }
func (t tcpSide) gone() <-chan struct{}       { return nil }
func (t tcpSide) closeWrite() error {
	if cw, ok := t.c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoHalfClose
}

// streamSide is a peer stream; conn is the Done of its peer connection.
type streamSide struct {
	s    transport.Stream
	conn <-chan struct{}
}

func (s streamSide) Read(b []byte) (int, error)  { return s.s.Read(b) }
func (s streamSide) Write(b []byte) (int, error) { return s.s.Write(b) }
func (s streamSide) close()                      { streamClose(s.s) }
func (s streamSide) abort()                      { streamAbort(s.s) }
func (s streamSide) closeWrite() error           { return streamCloseWrite(s.s) }
func (s streamSide) gone() <-chan struct{}       { return s.conn }

// pipe copies between local and remote until both directions ended, with
// half-close: the end of data on one side (EOF) becomes a half-close of
// the other, and the opposite direction keeps flowing. A read error in
// either direction tears both sides down; a write error does once the
// other direction has ended too. sts are counted as one more
// open connection for the duration. pipe closes both sides.
//
// The remote side gone (its peer connection closed) tears both down at
// once: both copies may wait on the local side (a write to a program
// that reads nothing, a read of one that says nothing), where the
// stream's end never reaches them.
//
// A side that cannot half-close (a local net.Conn that is not TCP) is
// closed whole at the end of data instead: the opposite
// direction then ends too, as a clean end of data, not as a failure.
func pipe(local, remote side, sts ...*stats) {
	for _, s := range sts {
		s.open.Add(1)
		s.total.Add(1)
	}
	defer func() {
		for _, s := range sts {
			s.open.Add(-1)
		}
	}()
	p := &piping{local: local, remote: remote}
	unwatch := p.watch(remote.gone())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.copy(remote, local, func(n int64) {
			for _, s := range sts {
				s.out.Add(n)
			}
		})
	}()
	p.copy(local, remote, func(n int64) {
		for _, s := range sts {
			s.in.Add(n)
		}
	})
	<-done
	unwatch()
	switch {
	case p.broken.Load():
		p.abort()
	case !p.failed.Load():
		local.close()
		remote.close()
	}
}

// piping is the shared state of one pipe's two directions.
type piping struct {
	local, remote side
	once          sync.Once
	failed        atomic.Bool // torn down: sides were aborted
	broken        atomic.Bool // a write failed: tear down once both directions ended
	closedWhole   atomic.Bool // a side that cannot half-close was closed at EOF
}

// watch tears p down when gone is closed (nil: nothing to watch); the
// returned func stops watching and waits until the watcher returned.
func (p *piping) watch(gone <-chan struct{}) (stop func()) {
	if gone == nil {
		return func() {}
	}
	quit, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case <-gone:
			p.abort()
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-ended
	}
}

func (p *piping) abort() {
	p.once.Do(func() {
		p.failed.Store(true)
		p.local.abort()
		p.remote.abort()
	})
}

// copy copies src to dst with a pooled buffer until src ends, then
// half-closes dst. count gets the bytes of each write. A read error
// tears both sides down at once, which unblocks the other direction
// too; a write error ends this direction only (see broken).
func (p *piping) copy(dst, src side, count func(int64)) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			w, werr := dst.Write(buf[:n])
			if w > 0 {
				count(int64(w))
			}
			if werr == nil && w < n {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				// dst takes no more. This direction ends as failed,
				// but what the other one still reads passes first
				// (an answer dst's peer sent before it went away:
				// a backend that answers an upload it will not read
				// and resets); pipe tears both sides down once that
				// direction has ended too.
				p.broken.Store(true)
				return
			}
		}
		if rerr != nil {
			if rerr != io.EOF && !p.closedWhole.Load() {
				p.abort()
				return
			}
			err := dst.closeWrite()
			if errors.Is(err, errNoHalfClose) {
				p.closedWhole.Store(true)
				dst.close()
				err = nil
			}
			if err != nil {
				p.abort()
			}
			return
		}
	}
}
