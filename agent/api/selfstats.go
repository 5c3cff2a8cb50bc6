package api

import (
	"net"
	"sync/atomic"
	"time"

	"peerdns/agent/collect"
)

// selfCounters are the API server's own figures, the ones Netdata charts
// about its web server (netdata.clients, netdata.requests, netdata.net,
// netdata.response_time). Updated with atomics on the request path.
type selfCounters struct {
	requests, respNanos atomic.Uint64
	respMax             atomic.Int64 // nanoseconds, since the last Stats
	in, out             atomic.Uint64
}

// request counts one answered request that started at t0.
func (c *selfCounters) request(t0 time.Time) {
	d := time.Since(t0)
	c.requests.Add(1)
	c.respNanos.Add(uint64(d))
	for {
		cur := c.respMax.Load()
		if int64(d) <= cur || c.respMax.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// Stats reads the server's own counters for the agent's netdata.clients,
// requests, net and response_time charts; the maximum restarts at every
// call (the collector calls it once a second).
func (s *Server) Stats() collect.ServerStats {
	c := &s.self
	return collect.ServerStats{
		Clients: int(s.srv.GetOpenConnectionsCount()), Requests: c.requests.Load(), BytesIn: c.in.Load(), BytesOut: c.out.Load(),
		ResponseTime: time.Duration(c.respNanos.Load()), MaxTime: time.Duration(c.respMax.Swap(0)),
	}
}

// countingListener counts the bytes of every accepted connection.
type countingListener struct {
	net.Listener
	c *selfCounters
}

func (l countingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{conn, l.c}, nil
}

type countingConn struct {
	net.Conn
	c *selfCounters
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.c.in.Add(uint64(n))
	return n, err
}

func (c countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.c.out.Add(uint64(n))
	return n, err
}
