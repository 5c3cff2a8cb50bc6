// Package tunneltest is a transport.Mesh for tests of the tunnel layer:
// real transport endpoints (in-memory or QUIC) connected pairwise, real
// streams, and announcements that every connected node sees at once (as
// if the peer protocol had gossiped them). It stands in for the peers
// supervisor, which implements Mesh for the running node.
package tunneltest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	"peerdns/transport"
)

// Network is a set of Mesh nodes sharing one announcement table.
type Network struct {
	mu        sync.Mutex                 // guards announced
	announced map[string]map[string]bool // node id → ids it announces
}

// NewNetwork returns an empty network.
func NewNetwork() *Network { return &Network{announced: map[string]map[string]bool{}} }

// Mesh is one node's view of the network. Safe for concurrent use.
type Mesh struct {
	net *Network
	ep  transport.Endpoint

	mu      sync.Mutex // guards the fields below
	conns   map[string]transport.Conn
	handler func(transport.Conn, transport.Stream)
	grams   func(transport.Conn, []byte)
	closed  bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // stream loops and handler goroutines
}

var _ transport.Mesh = (*Mesh)(nil)

// Add makes a node of n on ep. Close (registered with tb.Cleanup) ends
// its stream loops; closing ep stays with the caller.
func (n *Network) Add(tb testing.TB, ep transport.Endpoint) *Mesh {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mesh{net: n, ep: ep, conns: map[string]transport.Conn{}, ctx: ctx, cancel: cancel}
	tb.Cleanup(m.Close)
	return m
}

// ID is the node's peer id.
func (m *Mesh) ID() string { return m.ep.ID() }

// Connect dials b from a and registers the connection on both sides.
func Connect(ctx context.Context, a, b *Mesh) error {
	type res struct {
		c   transport.Conn
		err error
	}
	acc := make(chan res, 1)
	go func() {
		c, err := b.ep.Accept(ctx)
		acc <- res{c, err}
	}()
	ca, err := a.ep.Dial(ctx, b.ep.Addr().String(), b.ep.ID())
	if err != nil {
		<-acc
		return fmt.Errorf("dial: %w", err)
	}
	r := <-acc
	if r.err != nil {
		ca.Close("accept failed")
		return fmt.Errorf("accept: %w", r.err)
	}
	r.c.Admit()
	a.add(ca)
	b.add(r.c)
	return nil
}

// Disconnect closes the connection between m and peer (both sides see
// it close); the peer stops being a provider for m.
func (m *Mesh) Disconnect(peer string) {
	m.mu.Lock()
	c := m.conns[peer]
	m.mu.Unlock()
	if c != nil {
		c.Close("disconnect")
	}
}

func (m *Mesh) add(c transport.Conn) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		c.Close("mesh closed")
		return
	}
	m.conns[c.PeerID()] = c
	m.wg.Add(2)
	m.mu.Unlock()
	go m.streams(c)
	go m.datagrams(c)
}

// datagrams hands the datagrams the peer sends on c to the datagram
// handler, one after another, until c closes.
func (m *Mesh) datagrams(c transport.Conn) {
	defer m.wg.Done()
	for {
		b, err := c.ReceiveDatagram(m.ctx)
		if err != nil {
			return
		}
		m.mu.Lock()
		h := m.grams
		m.mu.Unlock()
		if h != nil {
			h(c, b)
		}
	}
}

// streams accepts the streams the peer opens on c and hands each to the
// handler in a goroutine of its own, until c closes.
func (m *Mesh) streams(c transport.Conn) {
	defer m.wg.Done()
	defer func() {
		m.mu.Lock()
		if m.conns[c.PeerID()] == c {
			delete(m.conns, c.PeerID())
		}
		m.mu.Unlock()
	}()
	for {
		s, err := c.AcceptStream(m.ctx)
		if err != nil {
			return
		}
		m.mu.Lock()
		h := m.handler
		m.mu.Unlock()
		if h == nil {
			s.Close()
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			h(c, s)
		}()
	}
}

// Conn is the connection to peerID.
func (m *Mesh) Conn(peerID string) (transport.Conn, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.conns[peerID]
	if ok && c.Err() != nil {
		return nil, false
	}
	return c, ok
}

// Providers lists the connected peers announcing id, sorted.
func (m *Mesh) Providers(id string) []string {
	m.mu.Lock()
	peers := make([]string, 0, len(m.conns))
	for p, c := range m.conns {
		if c.Err() == nil {
			peers = append(peers, p)
		}
	}
	m.mu.Unlock()
	m.net.mu.Lock()
	defer m.net.mu.Unlock()
	var out []string
	for _, p := range peers {
		if m.net.announced[p][id] {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// Announce replaces the ids this node serves.
func (m *Mesh) Announce(ids []string) {
	set := make(map[string]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	m.net.mu.Lock()
	m.net.announced[m.ep.ID()] = set
	m.net.mu.Unlock()
}

// Announced returns what this node announces now, sorted.
func (m *Mesh) Announced() []string {
	m.net.mu.Lock()
	defer m.net.mu.Unlock()
	var out []string
	for id := range m.net.announced[m.ep.ID()] {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// HandleStreams sets the stream handler.
func (m *Mesh) HandleStreams(h func(c transport.Conn, s transport.Stream)) {
	m.mu.Lock()
	m.handler = h
	m.mu.Unlock()
}

// HandleDatagrams sets the datagram handler.
func (m *Mesh) HandleDatagrams(h func(c transport.Conn, b []byte)) {
	m.mu.Lock()
	m.grams = h
	m.mu.Unlock()
}

// Close closes m's connections and waits for its goroutines (stream
// handlers end when their streams do). Idempotent.
func (m *Mesh) Close() {
	m.mu.Lock()
	m.closed = true
	conns := make([]transport.Conn, 0, len(m.conns))
	for _, c := range m.conns {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	m.cancel()
	for _, c := range conns {
		c.Close("mesh closed")
	}
	m.wg.Wait()
}
