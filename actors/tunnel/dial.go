package tunnel

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"

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
type streamConn struct {
	transport.Stream
	remote tunnelAddr
}

func (c *streamConn) LocalAddr() net.Addr  { return tunnelAddr("") }
func (c *streamConn) RemoteAddr() net.Addr { return c.remote }

// tunnelAddr names a tunnel end by its key (the 64 hex), network "hs".
type tunnelAddr string

func (a tunnelAddr) Network() string { return "hs" }
func (a tunnelAddr) String() string  { return string(a) }
