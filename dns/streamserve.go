package dns

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"peerdns/dns/padding"
	"peerdns/dns/zone"
)

// The stream transports' server (TCP, and DoT over TLS): the node's own,
// not miekg/dns's, which answers a connection's queries one after
// another: a query that waits for an upstream (up to its timeout, for a
// name whose servers are slow) held every query pipelined behind it on
// the connection, local answers included. RFC 7766 §6.2.1.1 asks a
// server to process pipelined queries concurrently and lets it answer
// them out of order (each answer carries its query's id); unbound and
// Knot do.
//
// Each connection has one reader, behind a buffer (pipelined queries
// come in one read). It reads a query (two length bytes, then the
// message); one the table or the upstream cache answers from wire
// (fastStream: the UDP fast path's pre-packed answers, without
// truncation, rate limit or cookies) it answers itself, at once; any
// other it hands to a goroutine of its own, up to MaxPipelined at once
// per connection; past that it reads no more until one is answered, so
// a client that pipelines thousands holds at most that many goroutines
// and messages. Answers are written whole, one at a
// time (a mutex), in the order they are ready. The first query must
// arrive within firstRead of the connection, later ones within
// idleTimeout of the one before (RFC 7766 §6.2.3 leaves the values to
// the server); a connection ends when its reader does, once its
// answers in flight are written. Writes carry the listener's write
// deadline (stream.go): a client that takes none of its answers is cut.
type streamServer struct {
	s    *Server
	ln   net.Listener
	path string // "tcp" or "tls": the query log's and debug log's path

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closing bool
	wg      sync.WaitGroup // one per connection
}

// MaxPipelined is how many queries of one TCP or DoT connection are
// answered at once.
const MaxPipelined = 16

const (
	firstRead   = 5 * time.Second
	idleTimeout = 10 * time.Second
)

func newStreamServer(s *Server, ln net.Listener, path string) *streamServer {
	return &streamServer{s: s, ln: ln, path: path, conns: map[net.Conn]struct{}{}}
}

// serve accepts connections until shutdown closes the listener (nil) or
// accepting fails for good.
func (ss *streamServer) serve() error {
	for {
		c, err := ss.ln.Accept()
		if err != nil {
			ss.mu.Lock()
			closing := ss.closing
			ss.mu.Unlock()
			if closing || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		ss.mu.Lock()
		if ss.closing {
			ss.mu.Unlock()
			c.Close()
			return nil
		}
		ss.conns[c] = struct{}{}
		ss.wg.Add(1)
		ss.mu.Unlock()
		go ss.serveConn(c)
	}
}

// shutdown stops accepting, ends every connection's reading at once and
// waits for the answers in flight to be written, or for ctx (then the
// connections are closed under them).
func (ss *streamServer) shutdown(ctx context.Context) error {
	ss.mu.Lock()
	ss.closing = true
	err := ss.ln.Close()
	for c := range ss.conns {
		_ = c.SetReadDeadline(time.Unix(1, 0))
	}
	ss.mu.Unlock()
	done := make(chan struct{})
	go func() { ss.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		ss.mu.Lock()
		for c := range ss.conns {
			c.Close()
		}
		ss.mu.Unlock()
		<-done
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// serveConn reads c's queries and answers each on a goroutine of its
// own (see streamServer).
func (ss *streamServer) serveConn(c net.Conn) {
	s := ss.s
	var client netip.Addr
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		client = a.AddrPort().Addr().Unmap()
	}
	recurse := s.recursionFor(client)
	var (
		wmu      sync.Mutex
		inflight sync.WaitGroup
		slots    = make(chan struct{}, MaxPipelined)
		head     [2]byte
		zq       zone.Query
		out      []byte // the fast path's answers, behind their length
	)
	br := bufio.NewReaderSize(c, 4<<10)
	defer func() {
		inflight.Wait()
		c.Close()
		ss.mu.Lock()
		delete(ss.conns, c)
		ss.mu.Unlock()
		ss.wg.Done()
	}()
	wait := firstRead
	for {
		if err := c.SetReadDeadline(time.Now().Add(wait)); err != nil {
			return
		}
		if _, err := io.ReadFull(br, head[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(head[:]))
		s.slowCnt.queries.Add(1)
		if p, err := br.Peek(n); err == nil {
			// Whole in the buffer (nearly every query): the fast path
			// reads it there.
			if out == nil {
				out = make([]byte, 2+fastStreamMax)
			}
			if m := ss.fastStream(p, &zq, out[2:], recurse, client); m > 0 {
				binary.BigEndian.PutUint16(out, uint16(m))
				wmu.Lock()
				_, err := c.Write(out[:2+m])
				wmu.Unlock()
				if err != nil {
					return
				}
				_, _ = br.Discard(n)
				wait = idleTimeout
				continue
			}
		}
		q := make([]byte, n)
		if _, err := io.ReadFull(br, q); err != nil {
			return
		}
		wait = idleTimeout
		slots <- struct{}{}
		inflight.Add(1)
		go func() {
			defer func() {
				<-slots
				inflight.Done()
			}()
			ss.answer(c, &wmu, q, recurse, client)
		}()
	}
}

// answer answers the query q from c and writes the answer (none for a
// message that is not a query, as on UDP).
func (ss *streamServer) answer(c net.Conn, wmu *sync.Mutex, q []byte, recurse bool, client netip.Addr) {
	s := ss.s
	b, m, _ := s.exchange(s.baseCtx, q, true, recurse, client)
	if b == nil {
		return
	}
	if ss.path == "tls" && padding.Padded(q) {
		// RFC 7830 §3 on an encrypted transport; plain TCP and UDP
		// answers are never padded (padding hides nothing there).
		b = padding.Pad(b)
	}
	qlog := s.qlog.on.Load() // as the query is answered, not after
	frame := make([]byte, 2+len(b))
	binary.BigEndian.PutUint16(frame, uint16(len(b)))
	copy(frame[2:], b)
	wmu.Lock()
	_, err := c.Write(frame)
	wmu.Unlock()
	if err != nil {
		return // the listener's connection closed itself (stream.go)
	}
	switch {
	case qlog && m != nil:
		s.noteMsg(client, m, ss.path)
	case qlog:
		s.note(client, b, ss.path)
	}
	if s.debugEnabled() {
		s.debugQuery(b, netip.AddrPortFrom(client, 0), ss.path)
	}
}

// fastStreamMax is the largest answer the stream fast path writes (its
// buffer, one per connection); a larger one goes the slow way.
const fastStreamMax = 4 << 10

// fastStream answers the query pkt from the table's pre-packed answers
// or the upstream cache's wire templates into out, as the UDP fast path
// does (Server.fast), with the stream's rules: no size limit but out's,
// no rate limit (the connection proved the address), RA cleared for a
// client without recursion. A query with a cookie goes the slow way. It
// returns the answer's length, 0 for the slow path.
func (ss *streamServer) fastStream(pkt []byte, q *zone.Query, out []byte, recurse bool, client netip.Addr) int {
	s := ss.s
	t := s.fresh(s.table.Load())
	if t == nil || !zone.Parse(pkt, len(out), q) || q.CookieLen > 0 {
		return 0
	}
	q.Limit = len(out) // no truncation on a stream
	m := t.Answer(pkt, q, out, s.cfg.UDPSize)
	src := kindSource(q.Kind)
	if m == 0 {
		if !q.Miss || !recurse {
			return 0
		}
		if m = s.cached(pkt, q, out); m == 0 {
			return 0
		}
		src = SourceCache
	}
	s.slowCnt.fast.Add(1)
	s.slowCnt.answers.add(src, int(out[3]&0xF))
	if !recurse {
		out[3] &^= 0x80 // RA: no recursion for this client
	}
	if s.qlog.on.Load() {
		s.note(client, out[:m], ss.path)
	}
	if s.debugEnabled() {
		s.debugQuery(out[:m], netip.AddrPortFrom(client, 0), ss.path)
	}
	return m
}
