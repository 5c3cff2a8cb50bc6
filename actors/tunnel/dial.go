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

// TCPConn is the socket under c, for a proxy that moves what it would
// read with splice(2) (nil when it is not TCP); it reports what it
// moved with CountRead, so the server's stats count it.
func (c *localConn) TCPConn() *net.TCPConn {
	tc, _ := c.Conn.(*net.TCPConn)
	return tc
}

// CountRead counts n bytes read from c past Read.
func (c *localConn) CountRead(n int64) {
	for _, s := range c.sts {
		s.out.Add(n)
	}
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
// Read deadlines are kept here, not on the stream: a QUIC stream with a
// read deadline makes a new timer at every Read that waits, and the
// edge keeps a moving deadline on every upstream connection (several
// waiting reads per response). The stream is given a read deadline only
// once it is due (by one timer per connection, reset as the deadline
// moves), which fails the read in progress and every later one, as the
// stream's own deadline would.
//
// Reads gather: a QUIC stream's Read returns what has arrived, which
// while a body flows is the one batch of packets the connection read from
// its socket last (about 8 KiB), so an edge copying a 64 KiB response to
// its client made one client write (a TCP segment, the client's wakeup)
// per batch. A Read into a large buffer (a body copy: at least gatherMin)
// that comes back short and mid-flow (at least gatherFlow bytes: several
// packets came at once, so more are on the way) reads on while the next
// piece arrives within gatherWait of the last, for at most gatherMax in
// all, until the buffer is full: an answer the peer sends whole
// (transport's send order) reaches the client in one write (a single
// gatherWait counted from the first piece would cut it in three or four).
// A body whose length is known asks for exactly what is left, so its end
// never waits; a small answer, a header read or a trickle (a WebSocket
// message, a server-sent event: short reads) never waits. quic-go's Read
// checks the deadline before the data that came, so a wait woken well
// after its deadline (its thread waited for a CPU on a busy machine)
// fails even when the next piece came in time: such a read is tried once
// more, with a fresh gathering wait. The pieces themselves come a packet
// batch at a time (up to 14 packets per send), with pauses between them
// while the sender serves its other streams. Measured through two nodes
// on a shared 2-vCPU machine (untimed, 64 KiB answers): 15-33 KB per
// gathered read, 4.0-4.6 client writes per answer.
type streamConn struct {
	transport.Stream
	remote tunnelAddr

	// mu orders the changes of the stream's read deadline: the user's
	// (SetReadDeadline), the timer's, gathering's.
	mu sync.Mutex
	// rd is the read deadline the user set (Unix ns, 0: none).
	rd atomic.Int64
	// due: the stream carries rd (it fell due, or was set in the past).
	due   bool
	timer *time.Timer // puts rd on the stream when it falls due
	look  [1]byte     // IdleSpoke reads into it
}

// Gathering reads (see streamConn). gatherWait is a few packet batches at
// a tunnel's bulk rate, gatherMax a 64 KiB buffer's worth at 256 Mbit/s:
// both well under a round trip between two nodes.
const (
	gatherMin  = 16 << 10
	gatherFlow = 4 << 10
	gatherWait = 250 * time.Microsecond
	gatherMax  = 2 * time.Millisecond
)

func (c *streamConn) Read(p []byte) (int, error) {
	n, err := c.Stream.Read(p)
	if err != nil || len(p) < gatherMin || n < gatherFlow || n == len(p) {
		return n, err
	}
	now := time.Now()
	end := now.Add(gatherMax)
	late := false // the last wait ended well past its deadline
	for n < len(p) && err == nil {
		until := now.Add(gatherWait)
		if until.After(end) && !late {
			until = end
		}
		c.mu.Lock()
		if rd := c.rd.Load(); c.due || rd != 0 && rd < until.UnixNano() {
			c.mu.Unlock()
			break
		}
		if c.Stream.SetReadDeadline(until) != nil {
			c.mu.Unlock()
			break
		}
		c.mu.Unlock()
		var m int
		m, err = c.Stream.Read(p[n:])
		n += m
		now = time.Now()
		if m == 0 && !late && isTimeout(err) && now.Sub(until) >= gatherWait {
			// Woken a gathering wait or more after the deadline (the
			// thread waited for a CPU): quic-go's Read fails a wait
			// past its deadline before it looks at what came, so look
			// once more.
			late, err = true, nil
			continue
		}
		late = false
		if !now.Before(end) {
			break
		}
	}
	if isTimeout(err) {
		err = nil // nothing more within gatherWait (or rd fell due: the next Read says so)
	}
	c.mu.Lock()
	c.putDeadline()
	c.mu.Unlock()
	return n, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// putDeadline gives the stream the read deadline it should carry: rd
// once due, none before. c.mu held.
func (c *streamConn) putDeadline() {
	if c.due {
		_ = c.Stream.SetReadDeadline(time.Unix(0, c.rd.Load()))
		return
	}
	_ = c.Stream.SetReadDeadline(time.Time{})
}

// fall puts rd on the stream if it is due (the timer fires late or
// early after a move: it checks).
func (c *streamConn) fall() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rd := c.rd.Load(); rd != 0 && !c.due && time.Now().UnixNano() >= rd {
		c.due = true
		c.putDeadline()
	}
}

func (c *streamConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.IsZero() {
		c.rd.Store(0)
	} else {
		c.rd.Store(t.UnixNano())
	}
	wasDue := c.due
	d := time.Until(t)
	c.due = !t.IsZero() && d <= 0
	switch {
	case t.IsZero():
		if c.timer != nil {
			c.timer.Stop()
		}
	case d > 0 && c.timer == nil:
		c.timer = time.AfterFunc(d, c.fall)
	case d > 0:
		c.timer.Reset(d)
	}
	if c.due || wasDue {
		c.putDeadline()
	}
	return nil
}

// IdleSpoke reports, without waiting, whether something came in on the
// stream since its last read (transport.Spoke): the far side's end (the
// server's target closed the connection), a reset, on a stream path
// bytes. The edge's pool asks it before it sends a request on a stream
// it held idle, and closes the connection when it reports true. The
// read deadline in force before (the user's, or none) is put back. It
// costs about 0.25 µs and allocates nothing.
func (c *streamConn) IdleSpoke() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.putDeadline()
	return transport.Spoke(c.Stream, &c.look)
}

func (c *streamConn) SetDeadline(t time.Time) error {
	_ = c.SetReadDeadline(t)
	return c.Stream.SetWriteDeadline(t)
}

// Close also stops the deadline's timer.
func (c *streamConn) Close() error {
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	return c.Stream.Close()
}

func (c *streamConn) LocalAddr() net.Addr  { return tunnelAddr("") }
func (c *streamConn) RemoteAddr() net.Addr { return c.remote }

// tunnelAddr names a tunnel end by its key (the 64 hex), network "hs".
type tunnelAddr string

func (a tunnelAddr) Network() string { return "hs" }
func (a tunnelAddr) String() string  { return string(a) }
