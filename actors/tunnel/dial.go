package tunnel

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"peerdns/transport"
)

// Dialer opens connections to tunnel servers by hs:// URL for users in
// this process (the edge proxy), routed exactly as a tunnel client routes
// its connections (route): a server on this node is dialed directly, a
// peer's server through one stream on the existing peer connection (no
// new QUIC handshake per connection). The tunnels supervisor attaches it
// when it starts and detaches it when it stops; in between Dial is safe
// for concurrent use and costs no actor round trip.
//
// A connection to a local server counts in that server's counters (one
// more open connection, bytes in and out), as a peer's stream would.
type Dialer struct {
	st atomic.Pointer[dialState]
}

type dialState struct {
	d   Deps
	reg *registry
	ctx context.Context // cancelled when the supervisor stops
}

// ErrTunnelsStopped: the tunnels supervisor is not running.
var ErrTunnelsStopped = errors.New("tunnels are not running")

func (x *Dialer) attach(d Deps, reg *registry, ctx context.Context) {
	if x != nil {
		x.st.Store(&dialState{d: d, reg: reg, ctx: ctx})
	}
}

func (x *Dialer) detach() {
	if x != nil {
		x.st.Store(nil)
	}
}

// Dial connects to the server of url ("hs://" + 64 hex). The returned
// connection also has CloseWrite (end of data, the other direction keeps
// flowing). Errors: a malformed url (wraps messages.ErrBadTunnel), no
// server reachable, the server refusing, ErrTunnelsStopped.
func (x *Dialer) Dial(ctx context.Context, url string) (net.Conn, error) {
	st := x.st.Load()
	if st == nil {
		return nil, ErrTunnelsStopped
	}
	k, err := parseClientKey(url)
	if err != nil {
		return nil, err
	}
	// Either the caller giving up or the tunnels stopping ends the dial.
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(st.ctx, cancel)
	defer func() {
		stop()
		cancel()
	}()
	remote, extra, done, err := route(ctx, st.d, st.reg, k)
	if err != nil {
		return nil, err
	}
	switch r := remote.(type) {
	case tcpSide:
		return newLocalConn(r.c, extra, done), nil
	case streamSide:
		return &streamConn{Stream: r.s, remote: tunnelAddr(k.Plain)}, nil
	default: // route returns only these two
		remote.abort()
		done()
		return nil, errors.New("tunnel: unexpected route")
	}
}

// localConn is a TCP connection to a local server's target, counted in
// the server's stats until closed.
type localConn struct {
	net.Conn
	sts  []*stats
	once sync.Once
	done func()
}

func newLocalConn(c net.Conn, sts []*stats, done func()) *localConn {
	for _, s := range sts {
		s.open.Add(1)
		s.total.Add(1)
	}
	return &localConn{Conn: c, sts: sts, done: done}
}

func (c *localConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	for _, s := range c.sts {
		s.out.Add(int64(n))
	}
	return n, err
}

func (c *localConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	for _, s := range c.sts {
		s.in.Add(int64(n))
	}
	return n, err
}

func (c *localConn) CloseWrite() error { return tcpSide{c.Conn}.closeWrite() }

func (c *localConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		for _, s := range c.sts {
			s.open.Add(-1)
		}
		c.done()
	})
	return err
}

// streamConn is a tunnel stream as a net.Conn. Close ends both
// directions normally (transport.Stream.Close).
//
// Reads gather: a QUIC stream's Read returns what has arrived, which
// while a body flows is the one batch of packets the connection read
// from its socket last (about 8 KiB), so an edge copying a 64 KiB
// response to its client made one client write (a TCP segment, the
// client's wakeup) per batch. A Read into a large buffer (a body copy:
// at least gatherMin) that comes back short and mid-flow (at least
// gatherFlow bytes: several packets came at once, so more are on the
// way) reads on for what arrives within gatherWait, until the buffer is
// full. A body whose length is known asks for exactly what is left, so
// its end never waits; a small answer, a header read or a trickle (a
// WebSocket message, a server-sent event: short reads) never waits.
type streamConn struct {
	transport.Stream
	remote tunnelAddr
	// rd is the read deadline the user set (Unix ns, 0: none), put back
	// after gathering. Atomic: a reader may be halted from another
	// goroutine by a deadline in the past.
	rd atomic.Int64
}

// Gathering reads (see streamConn). gatherWait is a few packet batches at
// a tunnel's bulk rate, well under a round trip between two nodes.
const (
	gatherMin  = 16 << 10
	gatherFlow = 4 << 10
	gatherWait = 250 * time.Microsecond
)

func (c *streamConn) Read(p []byte) (int, error) {
	n, err := c.Stream.Read(p)
	if err != nil || len(p) < gatherMin || n < gatherFlow || n == len(p) {
		return n, err
	}
	until := time.Now().Add(gatherWait)
	if rd := c.rd.Load(); rd != 0 && rd < until.UnixNano() {
		return n, nil
	}
	if c.Stream.SetReadDeadline(until) != nil {
		return n, nil
	}
	for n < len(p) && err == nil {
		var m int
		m, err = c.Stream.Read(p[n:])
		n += m
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = nil // nothing more within gatherWait: what we have
	}
	c.restoreReadDeadline()
	return n, err
}

// restoreReadDeadline puts the user's read deadline back on the stream,
// again if it changed meanwhile (a halt from another goroutine).
func (c *streamConn) restoreReadDeadline() {
	for {
		rd := c.rd.Load()
		_ = c.Stream.SetReadDeadline(unixTime(rd))
		if c.rd.Load() == rd {
			return
		}
	}
}

func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func (c *streamConn) SetReadDeadline(t time.Time) error {
	c.rd.Store(unixNano(t))
	return c.Stream.SetReadDeadline(t)
}

func (c *streamConn) SetDeadline(t time.Time) error {
	c.rd.Store(unixNano(t))
	return c.Stream.SetDeadline(t)
}

func (c *streamConn) LocalAddr() net.Addr  { return tunnelAddr("") }
func (c *streamConn) RemoteAddr() net.Addr { return c.remote }

// tunnelAddr names a tunnel end by its key (the 64 hex), network "hs".
type tunnelAddr string

func (a tunnelAddr) Network() string { return "hs" }
func (a tunnelAddr) String() string  { return string(a) }
