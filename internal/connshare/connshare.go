// Package connshare caps a listener's open connections and counts them
// by client address, so that one address holds at most a share of the
// cap (Limiter: the cap's slots and a Counter of the shares): the edge
// proxy (its HTTP and HTTPS listeners and its HTTP/3 connections
// together) and the DNS server's TCP and DNS-over-TLS listeners each
// keep one Limiter.
//
// Without a share, one host that opens connections and keeps them fills
// a listener's cap alone and everyone else waits (the edge) or is turned
// away (DNS). A connection over its address's share is closed at once by
// the listener. An IPv6 client is counted by its /64, which one host
// usually holds whole, so walking the addresses of its prefix gains it
// nothing; an IPv4 client by its address. Loopback is not counted: the
// machine's own users (a local resolver, the node's own tools,
// benchmarks) are trusted as the machine is.
//
// The share is 256 connections, or a quarter of the cap when that is
// less (Share): a browser opens at most six HTTP/1.1 connections to a
// site and one HTTP/2 connection, a resolver a handful of TCP ones, so a
// few dozen people behind one NAT, or a busy forwarding resolver, fit.
// A node behind a reverse proxy or CDN on another machine sees every
// client at the proxy's few addresses; its operator gives the edge a
// larger share (New's perAddr: the EDGE_CONNS_PER_ADDRESS setting).
//
// One mutex guards the counts, taken once as a connection is accepted
// and once as it closes, never per request: about 85 ns for both on
// one core, 100 on two at once (BenchmarkEnterLeave), so a 16-core
// machine accepting 100,000 connections a second holds it about 1% of
// the time. A sharded map would pay off only at connection rates far
// beyond that.
//
// Servers that let one set a per-client limit mostly leave it off by
// default (unbound's tcp-connection-limit, dnsdist's
// setMaxTCPConnectionsPerClient, nginx's limit_conn); here it is on,
// since a node is often reachable by anyone and its caps exist to keep
// the process's descriptors for the rest of the node.
package connshare

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Share is the connections one address may hold under a cap of
// maxConns: 256, or a quarter of the cap when that is less, at least 1.
func Share(maxConns int) int { return max(min(256, maxConns/4), 1) }

// Counter counts the open connections of each client address against
// its share. Its methods are safe for concurrent use.
type Counter struct {
	per           int
	countLoopback bool
	mu            sync.Mutex
	by            map[netip.Addr]int
	refused       atomic.Int64
}

// New is a Counter for a listener whose cap is maxConns: each address's
// share is perAddr, at most the cap (0: Share). countLoopback counts
// loopback clients too (tests, whose clients are all on loopback).
func New(maxConns, perAddr int, countLoopback bool) *Counter {
	if perAddr <= 0 {
		perAddr = Share(maxConns)
	}
	return &Counter{per: max(min(perAddr, maxConns), 1), countLoopback: countLoopback, by: map[netip.Addr]int{}}
}

// PerAddr is the share of one address.
func (c *Counter) PerAddr() int { return c.per }

// Refused counts the connections Enter turned away since New.
func (c *Counter) Refused() int64 { return c.refused.Load() }

// Place is what one connection holds of its address's share; the zero
// Place holds nothing (an address not counted).
type Place struct {
	key     netip.Addr
	counted bool
}

// Addr is the address (an IPv6 client's /64 as its first address) the
// place is counted under; invalid when it is not counted.
func (p Place) Addr() netip.Addr { return p.key }

// Key is the address a client at a is counted under: its IPv4 address,
// or its IPv6 address's /64; false: not counted (loopback unless
// counted, or neither a TCP nor a UDP address: a QUIC connection's
// client is at a UDP one).
func (c *Counter) Key(a net.Addr) (netip.Addr, bool) {
	var raw net.IP
	switch a := a.(type) {
	case *net.TCPAddr:
		raw = a.IP
	case *net.UDPAddr:
		raw = a.IP
	default:
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(raw)
	if !ok {
		return netip.Addr{}, false
	}
	ip = ip.Unmap()
	if ip.IsLoopback() && !c.countLoopback {
		return netip.Addr{}, false
	}
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		ip = p.Addr()
	}
	return ip, true
}

// Enter counts a connection from a. false when a's address holds its
// share already: nothing is counted but the refusal, and the place
// names the address (for a log line).
func (c *Counter) Enter(a net.Addr) (Place, bool) {
	key, counted := c.Key(a)
	if !counted {
		return Place{}, true
	}
	c.mu.Lock()
	n := c.by[key]
	if n >= c.per {
		c.mu.Unlock()
		c.refused.Add(1)
		return Place{key: key}, false
	}
	c.by[key] = n + 1
	c.mu.Unlock()
	return Place{key: key, counted: true}, true
}

// Leave gives back a place Enter handed out (once per place; nothing
// for one not counted).
func (c *Counter) Leave(p Place) {
	if !p.counted {
		return
	}
	c.mu.Lock()
	if n := c.by[p.key]; n <= 1 {
		delete(c.by, p.key)
	} else {
		c.by[p.key] = n - 1
	}
	c.mu.Unlock()
}
