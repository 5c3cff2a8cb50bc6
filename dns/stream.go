package dns

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"peerdns/internal/connshare"
)

// Stream transports (TCP, DoT): what miekg/dns's server leaves open.
//
//   - It never sets a write deadline (its WriteTimeout field is not read
//     by v1.1.x): a client that pipelines queries and reads none of the
//     answers blocks the connection's goroutine in Write once the socket
//     buffers are full, forever — the idle timeout never comes, since
//     the goroutine is not reading, and the connection pins its
//     goroutine, its descriptor and megabytes of kernel send buffer
//     until the client goes away. streamConn sets a write deadline
//     before every write.
//   - A temporary Accept error (EMFILE, ENFILE: descriptors exhausted)
//     makes it try again at once, spinning a CPU for as long as the
//     condition lasts. streamListener backs off as net/http does (5 ms
//     doubling to 1 s).
//   - It has no cap on connections: every client can hold one goroutine
//     and one descriptor per connection until the descriptors of the
//     whole process (admin API, edge, p2p) run out. streamListener caps
//     the open connections; over the cap a new one is closed at once.
//     One client address (an IPv6 client's /64; loopback not counted)
//     holds at most its share of the cap (internal/connshare: 256 of
//     the default 1,024; Config.MaxStreamConnsPerAddr sets it), so one
//     host cannot take every slot; over its share a new connection is
//     closed at once too.
type streamListener struct {
	net.Listener
	writeTimeout time.Duration
	lim          *connshare.Limiter
	closed       atomic.Bool
}

// Default limits of the stream transports.
const (
	DefaultStreamWriteTimeout = 5 * time.Second
	DefaultMaxStreamConns     = 1024
)

// newStreamListener caps ln at cfg's MaxStreamConns and shares them by
// address (MaxStreamConnsPerAddr).
func newStreamListener(ln net.Listener, cfg *Config) *streamListener {
	return &streamListener{Listener: ln, writeTimeout: cfg.StreamWriteTimeout,
		lim: connshare.NewLimiter(cfg.MaxStreamConns, cfg.MaxStreamConnsPerAddr, cfg.countLoopback)}
}

func (l *streamListener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			//lint:ignore SA1019 EMFILE and ENFILE are told only by Temporary (net/http's Serve does the same)
			if !l.closed.Load() && errors.As(err, &ne) && ne.Temporary() {
				if delay == 0 {
					delay = 5 * time.Millisecond
				} else if delay *= 2; delay > time.Second {
					delay = time.Second
				}
				time.Sleep(delay)
				continue
			}
			return nil, err
		}
		delay = 0
		place, _, ok := l.lim.Admit(c.RemoteAddr())
		if !ok {
			c.Close() // counted by the limiter
			continue
		}
		return &streamConn{Conn: c, l: l, place: place}, nil
	}
}

func (l *streamListener) Close() error {
	l.closed.Store(true)
	return l.Listener.Close()
}

// streamConn is one accepted connection: a write deadline before each
// write, its slot and its address's place given back once on Close.
type streamConn struct {
	net.Conn
	l     *streamListener
	place connshare.Place
	once  sync.Once
}

func (c *streamConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.l.writeTimeout)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(b)
	if err != nil {
		// A failed write (the deadline passed) leaves the stream with
		// part of a message: nothing more can be sent on it. Close it
		// now, or the server would read the next pipelined query and
		// wait for the deadline again, once per query left.
		c.Conn.Close()
	}
	return n, err
}

func (c *streamConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.lim.Leave(c.place)
		c.l.lim.Give()
	})
	return err
}
