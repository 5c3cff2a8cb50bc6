package transport

import (
	"context"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"peerdns/messages"
	"peerdns/transport/identity"
)

// MemNetwork is an in-memory twin of the QUIC network for tests: its
// endpoints dial each other by address with the same Conn contract
// (framed control stream through the same frame decoder, extra streams,
// lossy datagrams), minus TLS: an endpoint's id is taken on its word.
// Safe for concurrent use.
type MemNetwork struct {
	mu    sync.Mutex
	eps   map[string]*MemEndpoint
	next  int
	meter atomic.Pointer[MemMeter]
	// frameTimeout is Config.FrameTimeout for connections dialed from
	// now on (0: DefaultFrameTimeout).
	frameTimeout atomic.Int64
}

// SetFrameTimeout sets the least time a control frame has from its
// first byte to its last on connections dialed from now on, as
// Config.FrameTimeout does for QUIC (0: DefaultFrameTimeout). Tests of a
// stalled peer set it short.
func (n *MemNetwork) SetFrameTimeout(d time.Duration) { n.frameTimeout.Store(int64(d)) }

// MemMeter is told about every control-stream frame an endpoint of the
// network sends: the sender's and receiver's ids, the envelope kind and
// the frame's size on the wire (length prefix included). It is called on
// the sending goroutine, so it must be cheap and safe for concurrent use.
type MemMeter func(from, to, kind string, bytes int)

// SetMeter installs m (nil removes it). Simulations use it to count bytes
// per node and per message kind without encoding anything twice.
func (n *MemNetwork) SetMeter(m MemMeter) {
	if m == nil {
		n.meter.Store(nil)
		return
	}
	n.meter.Store(&m)
}

// NewMemNetwork returns an empty in-memory network.
func NewMemNetwork() *MemNetwork { return &MemNetwork{eps: map[string]*MemEndpoint{}} }

// Listen adds an endpoint with a fresh address of the form 127.0.0.1:N
// (not a socket: only endpoints of this network can reach it).
func (n *MemNetwork) Listen(id *identity.Identity, log *slog.Logger) *MemEndpoint {
	if log == nil {
		log = slog.Default()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next++
	e := &MemEndpoint{net: n, id: id, log: log, addr: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 20000 + n.next},
		accepted: make(chan *memConn, 16), closed: make(chan struct{})}
	n.eps[e.addr.String()] = e
	return e
}

// MemEndpoint is an Endpoint of a MemNetwork.
type MemEndpoint struct {
	net      *MemNetwork
	id       *identity.Identity
	log      *slog.Logger
	addr     *net.UDPAddr
	accepted chan *memConn
	closed   chan struct{}
	once     sync.Once
	mu       sync.Mutex
	conns    []*memConn
}

var _ Endpoint = (*MemEndpoint)(nil)

// ID is the endpoint's peer id.
func (e *MemEndpoint) ID() string { return e.id.ID() }

// Addr is the endpoint's in-memory address.
func (e *MemEndpoint) Addr() net.Addr { return e.addr }

// Dial connects to the endpoint at addr, checking its id like QUIC does.
func (e *MemEndpoint) Dial(ctx context.Context, addr, peerID string) (Conn, error) {
	select {
	case <-e.closed:
		return nil, ErrClosed
	default:
	}
	e.net.mu.Lock()
	to := e.net.eps[addr]
	e.net.mu.Unlock()
	if to == nil {
		return nil, fmt.Errorf("dial %s: no endpoint there", addr)
	}
	if to == e {
		return nil, fmt.Errorf("dial %s: %w", addr, ErrSelf)
	}
	if peerID != "" && to.ID() != peerID {
		return nil, fmt.Errorf("dial %s: %w", addr, ErrWrongPeer)
	}
	a, b := net.Pipe()
	shared := &memLink{done: make(chan struct{})}
	_, _ = rand.Read(shared.secret[:])
	out := newMemConn(e, to.ID(), true, a, shared, to.addr)
	in := newMemConn(to, e.ID(), false, b, shared, e.addr)
	out.other, in.other = in, out
	select {
	case to.accepted <- in:
	case <-to.closed:
		return nil, fmt.Errorf("dial %s: endpoint closed", addr)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	e.track(out)
	to.track(in)
	return out, nil
}

func (e *MemEndpoint) track(c *memConn) {
	e.mu.Lock()
	e.conns = append(e.conns, c)
	e.mu.Unlock()
}

// Accept returns the next inbound connection.
func (e *MemEndpoint) Accept(ctx context.Context) (Conn, error) {
	select {
	case c := <-e.accepted:
		return c, nil
	case <-e.closed:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// RefusedInbound is always 0: the in-memory network has no handshake to
// flood, so it does not cap pending connections.
func (e *MemEndpoint) RefusedInbound() int64 { return 0 }

// Close removes the endpoint from the network and closes its connections.
func (e *MemEndpoint) Close() error {
	e.once.Do(func() {
		close(e.closed)
		e.net.mu.Lock()
		delete(e.net.eps, e.addr.String())
		e.net.mu.Unlock()
		e.mu.Lock()
		conns := e.conns
		e.mu.Unlock()
		for _, c := range conns {
			c.Close("endpoint closed")
		}
	})
	return nil
}

// CloseTo closes every connection of this endpoint with peer (both ends
// of a link close together) and returns how many were open. Simulations
// use it to cut the links a partition crosses.
func (e *MemEndpoint) CloseTo(peer, reason string) int {
	e.mu.Lock()
	var cut []*memConn
	for _, c := range e.conns {
		if c.peer == peer {
			cut = append(cut, c)
		}
	}
	e.mu.Unlock()
	n := 0
	for _, c := range cut {
		if c.Err() == nil {
			n++
		}
		c.Close(reason)
	}
	return n
}

// memLink is the state both ends of a connection share.
type memLink struct {
	once   sync.Once
	done   chan struct{}
	reason string   // what Close was given
	by     *memConn // the end that closed the link
	secret [32]byte // stands in for the TLS session's exporter secret
}

func (l *memLink) close(by *memConn, reason string) {
	l.once.Do(func() {
		l.reason, l.by = reason, by
		close(l.done)
	})
}

// memConn is one end of an in-memory connection.
type memConn struct {
	ep       *MemEndpoint
	peer     string
	outbound bool
	ctrl     net.Conn
	link     *memLink
	remote   net.Addr
	other    *memConn
	streams  chan *memStream
	grams    chan []byte
	wmu      sync.Mutex
	frameReader
}

var _ Conn = (*memConn)(nil)

func newMemConn(ep *MemEndpoint, peer string, outbound bool, ctrl net.Conn, link *memLink, remote net.Addr) *memConn {
	return &memConn{ep: ep, peer: peer, outbound: outbound, ctrl: ctrl, link: link, remote: remote,
		streams: make(chan *memStream, 16), grams: make(chan []byte, 64),
		frameReader: frameReader{timeout: time.Duration(ep.net.frameTimeout.Load())}}
}

func (c *memConn) PeerID() string        { return c.peer }
func (c *memConn) Outbound() bool        { return c.outbound }
func (c *memConn) LocalAddr() net.Addr   { return c.ep.addr }
func (c *memConn) RemoteAddr() net.Addr  { return c.remote }
func (c *memConn) Done() <-chan struct{} { return c.link.done }
func (c *memConn) Admit()                {}

func (c *memConn) Err() error {
	select {
	case <-c.link.done:
		return &closeError{reason: c.link.reason, peer: c.link.by != c}
	default:
		return nil
	}
}

func (c *memConn) Send(m *messages.Envelope) error {
	b, err := EncodeFrame(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.ctrl.Write(b); err != nil {
		c.Close("control stream write failed")
		return fmt.Errorf("send %s to %.16s: %w", m.Kind, c.peer, err)
	}
	if mt := c.ep.net.meter.Load(); mt != nil {
		(*mt)(c.ep.ID(), c.peer, m.Kind, len(b))
	}
	return nil
}

// Recv behaves as the QUIC Conn's: a bad or oversize frame closes the
// connection and is logged.
func (c *memConn) Recv() (*messages.Envelope, error) {
	m, bad, err := c.next(c.ctrl)
	if bad != nil {
		reason := frameFault(bad)
		c.ep.log.Warn("closing peer connection: "+reason, "peer", c.peer, "err", bad)
		c.Close(reason)
		return nil, bad
	}
	if err != nil {
		if closed := c.Err(); closed != nil {
			return nil, closed // why the link closed, as QUIC's Recv says
		}
	}
	return m, err
}

// WriteRaw writes bytes to the control stream as they are, so tests can
// send what Send would refuse to encode.
func (c *memConn) WriteRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.ctrl.Write(b)
	return err
}

func (c *memConn) OpenStream(ctx context.Context) (Stream, error) {
	a, b := newMemStreamPair()
	select {
	case c.other.streams <- b:
		return a, nil
	case <-c.link.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *memConn) AcceptStream(ctx context.Context) (Stream, error) {
	select {
	case s := <-c.streams:
		return s, nil
	case <-c.link.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// MemMaxDatagram is the in-memory datagram payload limit, about what
// QUIC allows on a path whose MTU was never probed.
const MemMaxDatagram = 1200

// SendDatagram delivers b unless the peer's queue is full (datagrams are
// unreliable, as over QUIC). Over MemMaxDatagram it fails with
// ErrDatagramTooLarge, as QUIC does over its limit.
func (c *memConn) SendDatagram(b []byte) error {
	select {
	case <-c.link.done:
		return ErrClosed
	default:
	}
	if len(b) > MemMaxDatagram {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrDatagramTooLarge, len(b), MemMaxDatagram)
	}
	select {
	case c.other.grams <- append([]byte(nil), b...):
	default:
	}
	return nil
}

func (c *memConn) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	select {
	case d := <-c.grams:
		return d, nil
	case <-c.link.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close closes both ends, as a QUIC CONNECTION_CLOSE would.
// ExportKeyingMaterial derives from a random secret both ends share, the
// way TLS derives from its session: the same on both ends of one link,
// different on every other link.
func (c *memConn) ExportKeyingMaterial(label string, context []byte, length int) ([]byte, error) {
	return hkdf.Key(sha256.New, c.link.secret[:], nil, label+"\x00"+string(context), length)
}

func (c *memConn) Close(reason string) error {
	c.link.close(c, reason)
	c.ctrl.Close()
	if c.other != nil {
		c.other.ctrl.Close()
	}
	return nil
}
