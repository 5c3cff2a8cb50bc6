package transport

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"

	"peerdns/messages"
)

// A stream path is the peer protocol over one reliable byte stream: a TCP
// connection (tcp.go) or a stream relayed through a connected peer
// (relay.go). The two share this code: TLS 1.3 over the byte stream with
// the very certificates and checks of the QUIC path (tls.go), so the
// peer proves the same Ed25519 key and a relay in the middle sees only
// ciphertext it cannot read or forge, and then a stream multiplexer over
// the TLS connection gives the control stream, the tunnel and plugin
// streams and a datagram stream.
//
// The multiplexer is hashicorp/yamux, not one of ours: it is small,
// well kept, used in production for years (Consul, Nomad, libp2p's
// go-yamux fork), has per-stream flow control, half-close (its Close is
// a FIN, reads go on) and pings.
// What it lacks against QUIC, and how a stream path makes do:
//
//   - no stream reset: Stream.Abort ends both directions like Close, so
//     the peer reads a clean end of stream instead of an error;
//   - a session that fails (its byte stream cut or ended by a relay,
//     TLS refusing a record, keep-alive finding it dead) ends its streams
//     with the io.EOF of a FIN: yamuxStream.Read turns that into an
//     error (errPathCut), so a stream cut short never reads as whole;
//   - no cap on the streams a peer opens: AcceptStream counts the open
//     ones and closes those above Config.MaxIncomingStreams at once;
//   - a keep-alive that cuts live sessions: yamux's closes the session
//     when one ping's answer takes longer than its write timeout, and on
//     a slow uplink under a bulk upload the answer waits behind the data
//     queued before it (yamux's queue, TLS, the socket buffer, the
//     router's queue): a session still moving bytes was cut. It is off;
//     keepAlive pings every Config.KeepAlive and closes the session only
//     when nothing at all came from the peer for Config.IdleTimeout, as
//     QUIC's idle timeout does. Each side's pings keep the other hearing
//     something while it only sends;
//   - no datagrams: they travel length-framed (2 bytes, big-endian) on a
//     stream of their own, opened by the dialer after the control stream,
//     and are dropped (as UDP would) when that stream is backed up.
//
// A stream path carries the same envelopes in the same frames as QUIC;
// the layer above cannot tell them apart except by Path.

// Path names of the ways a Conn reaches its peer (Pather).
const (
	PathQUIC    = "quic"
	PathTCP     = "tcp"
	PathRelayed = "relayed"
)

// Pather is implemented by every Conn of this package: the path it runs
// on and, for a relayed one, the relay's peer id.
type Pather interface {
	Path() string
	Via() string
}

// PathOf returns c's path (PathQUIC for a Conn that does not say).
func PathOf(c Conn) (path, via string) {
	if p, ok := c.(Pather); ok {
		return p.Path(), p.Via()
	}
	return PathQUIC, ""
}

func (c *quicConn) Path() string { return PathQUIC }
func (c *quicConn) Via() string  { return "" }

// datagramPreface opens the datagram stream of a stream path.
const datagramPreface = "PDG1"

// maxStreamDatagram is the largest datagram a stream path carries: its
// 2-byte length frame. There is no path MTU to respect.
const maxStreamDatagram = 1<<16 - 1

// datagramQueue bounds the datagrams waiting to be written or read; more
// are dropped.
const datagramQueue = 512

// datagramQueueBytes bounds the bytes of the datagrams received and not
// read yet; more are dropped. A peer's datagrams are read only once its
// session is established, and keys cost nothing: without it each pending
// connection could hold datagramQueue datagrams of up to 64 KiB (32 MiB).
// It is what a QUIC connection holds of unread data at first (its initial
// connection window), and 512 datagrams of a usual 1,400 bytes fit.
const datagramQueueBytes = 1 << 20

// streamConn is a Conn over TLS + yamux over one byte stream.
type streamConn struct {
	raw      net.Conn
	tls      *tls.Conn
	sess     *yamux.Session
	ctrl     *yamux.Stream
	dgram    *yamux.Stream
	peer     string
	outbound bool
	path     string
	via      string
	log      *slog.Logger
	cfg      *Config
	slot     *pendingSlot

	wmu sync.Mutex
	frameReader

	dgOut   chan []byte
	dgIn    chan []byte
	dgBytes atomic.Int64 // bytes in dgIn

	gate *admitGate // inbound: what the peer may send before Admit; nil when dialed

	openIn atomic.Int64 // accepted streams not closed yet
	drain  atomic.Bool  // Close waits for the streams to end (Drain)
	// draining: a Close under Drain is waiting; later Closes add nothing.
	draining atomic.Bool

	errMu  sync.Mutex
	err    error
	closed chan struct{}
	once   sync.Once
}

var (
	_ Conn   = (*streamConn)(nil)
	_ Pather = (*streamConn)(nil)
)

func yamuxConfig(cfg *Config) *yamux.Config {
	y := yamux.DefaultConfig()
	y.LogOutput = io.Discard
	y.EnableKeepAlive = false // keepAlive instead
	y.ConnectionWriteTimeout = cfg.WriteTimeout
	w := min(cfg.MaxStreamReceiveWindow, 1<<31)
	if w < 256<<10 {
		w = 256 << 10
	}
	y.MaxStreamWindowSize = uint32(w)
	y.AcceptBacklog = 256
	return y
}

// newStreamConn runs TLS and the multiplexer over raw and opens (dialer)
// or accepts (acceptor) the control and datagram streams. want is the key
// the peer must prove ("" = any; dialer only). raw is closed on failure.
func newStreamConn(ctx context.Context, raw net.Conn, outbound bool, cert tls.Certificate, self, want string, cfg *Config, path, via string) (*streamConn, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.HandshakeTimeout)
	defer cancel()
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	var tc *tls.Conn
	if outbound {
		tc = tls.Client(raw, clientTLS(cert, want))
	} else {
		tc = tls.Server(raw, serverTLS(cert))
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("tls: %w", err)
	}
	certs := tc.ConnectionState().PeerCertificates
	rawCerts := make([][]byte, len(certs))
	for i, c := range certs {
		rawCerts[i] = c.Raw
	}
	peer, err := peerIDFromCerts(rawCerts)
	if err != nil {
		_ = raw.Close()
		return nil, err
	}
	if peer == self {
		_ = raw.Close()
		return nil, ErrSelf
	}
	y := yamuxConfig(cfg)
	c := &streamConn{
		raw: raw, tls: tc, peer: peer, outbound: outbound, path: path, via: via, log: cfg.Logger, cfg: cfg,
		frameReader: frameReader{timeout: cfg.FrameTimeout},
		dgOut:       make(chan []byte, datagramQueue), dgIn: make(chan []byte, datagramQueue), closed: make(chan struct{}),
	}
	fail := func(err error) (*streamConn, error) {
		if c.sess != nil {
			_ = c.sess.Close()
		}
		_ = raw.Close()
		return nil, err
	}
	mc := &frameCoalescer{Conn: tc}
	mc.heard.Store(time.Now().UnixNano())
	if outbound {
		c.sess, err = yamux.Client(mc, y)
		if err != nil {
			return fail(err)
		}
		if c.ctrl, err = c.sess.OpenStream(); err != nil {
			return fail(fmt.Errorf("control stream: %w", err))
		}
		if _, err = c.ctrl.Write(preface); err != nil {
			return fail(fmt.Errorf("control stream: %w", err))
		}
		if c.dgram, err = c.sess.OpenStream(); err != nil {
			return fail(fmt.Errorf("datagram stream: %w", err))
		}
		if _, err = c.dgram.Write([]byte(datagramPreface)); err != nil {
			return fail(fmt.Errorf("datagram stream: %w", err))
		}
	} else {
		c.gate = newAdmitGate(int64(cfg.InitialConnectionReceiveWindow))
		c.sess, err = yamux.Server(&gatedConn{frameCoalescer: mc, gate: c.gate}, y)
		if err != nil {
			return fail(err)
		}
		for c.ctrl == nil || c.dgram == nil {
			st, err := c.sess.AcceptStreamWithContext(ctx)
			if err != nil {
				return fail(fmt.Errorf("peer %.16s: no control stream: %w", peer, err))
			}
			got := make([]byte, len(preface))
			_ = st.SetReadDeadline(time.Now().Add(cfg.HandshakeTimeout))
			if _, err := io.ReadFull(st, got); err != nil {
				return fail(fmt.Errorf("peer %.16s: stream preface: %w", peer, err))
			}
			_ = st.SetReadDeadline(time.Time{})
			switch {
			case string(got) == ControlPreface && c.ctrl == nil:
				c.ctrl = st
			case string(got) == datagramPreface && c.dgram == nil:
				c.dgram = st
			default:
				return fail(fmt.Errorf("peer %.16s: bad stream preface", peer))
			}
		}
	}
	_ = raw.SetDeadline(time.Time{})
	go c.watch()
	go c.keepAlive(mc)
	go c.writeDatagrams()
	go c.readDatagrams()
	return c, nil
}

// watch records the end of the session (keep-alive timeout, byte stream
// closed, TLS record that does not authenticate) and closes everything.
func (c *streamConn) watch() {
	<-c.sess.CloseChan()
	c.shut(errors.New("peer connection closed"))
}

func (c *streamConn) shut(err error) { c.end(err, false) }

// keepAlive pings the peer every KeepAlive and closes c once nothing has
// come from it for IdleTimeout (see the top of the file). A ping is sent
// whatever the last one's fate: while our own uplink is backed up, our
// answers to the peer's pings are late, but its pings still reach us;
// one Ping call waits at most twice WriteTimeout, so a few at most are
// in flight.
func (c *streamConn) keepAlive(mc *frameCoalescer) {
	t := time.NewTicker(c.cfg.KeepAlive)
	defer t.Stop()
	for {
		select {
		case <-c.closed:
			return
		case <-t.C:
		}
		if quiet := time.Since(time.Unix(0, mc.heard.Load())); quiet >= c.cfg.IdleTimeout {
			c.shut(fmt.Errorf("peer connection timed out: nothing heard for %v", quiet.Round(time.Millisecond)))
			return
		}
		go func() { _, _ = c.sess.Ping() }()
	}
}

// end closes c once, recording err: the byte stream at once, or, with
// linger, once the peer has closed it (hangUp, streamreplaced.go).
func (c *streamConn) end(err error, linger bool) {
	c.once.Do(func() {
		c.errMu.Lock()
		c.err = err
		c.errMu.Unlock()
		if c.gate != nil {
			c.gate.close() // a read waiting at the gate ends
		}
		if linger {
			go c.hangUp()
		} else {
			_ = c.sess.Close()
			_ = c.raw.Close()
		}
		close(c.closed)
	})
}

func (c *streamConn) PeerID() string       { return c.peer }
func (c *streamConn) Outbound() bool       { return c.outbound }
func (c *streamConn) Path() string         { return c.path }
func (c *streamConn) Via() string          { return c.via }
func (c *streamConn) LocalAddr() net.Addr  { return c.raw.LocalAddr() }
func (c *streamConn) RemoteAddr() net.Addr { return c.raw.RemoteAddr() }
func (c *streamConn) Done() <-chan struct{} {
	return c.closed
}

// isClosed reports whether c is closed for our side (Done).
func (c *streamConn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

func (c *streamConn) Err() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

func (c *streamConn) Admit() {
	if c.slot != nil {
		c.slot.release()
	}
	if c.gate != nil {
		c.gate.admit()
	}
}

func (c *streamConn) Close(reason string) error {
	if c.drain.Load() {
		if c.draining.CompareAndSwap(false, true) {
			go c.closeWhenIdle(reason)
		}
		return nil
	}
	c.closeFor(reason, fmt.Errorf("closed: %s", reason))
	return nil
}

// MaxDrain bounds how long a drained connection stays open for the
// streams that were open on it.
const MaxDrain = 30 * time.Minute

// Drain makes c's Close wait until the tunnel and plugin streams open on
// it have ended (at most MaxDrain) instead of cutting them: the peer
// moved to a better path and new streams go there, while the open ones
// finish where they started. It reports false for a Conn that cannot
// (QUIC: its owner moves to no better path than itself), which then
// closes as usual.
func Drain(c Conn) bool {
	sc, ok := c.(*streamConn)
	if !ok {
		return false
	}
	sc.drain.Store(true)
	return true
}

func (c *streamConn) closeWhenIdle(reason string) {
	deadline := time.NewTimer(MaxDrain)
	defer deadline.Stop()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for c.OpenStreams() > 0 {
		select {
		case <-tick.C:
		case <-deadline.C:
			c.shut(fmt.Errorf("closed after draining for %s: %s", MaxDrain, reason))
			return
		case <-c.closed:
			return
		}
	}
	c.closeFor(reason, fmt.Errorf("closed once drained: %s", reason))
}

func (c *streamConn) Send(m *messages.Envelope) error {
	b, err := EncodeFrame(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	// Closed for our side: a link closed as replaced keeps its byte
	// stream a moment for the notice (hangUp), and nothing may follow it.
	if c.isClosed() {
		return fmt.Errorf("send %s to %.16s: %w", m.Kind, c.peer, ErrClosed)
	}
	_ = c.ctrl.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout))
	if _, err := c.ctrl.Write(b); err != nil {
		if c.Err() == nil {
			c.log.Warn("closing peer connection: control write failed", "peer", c.peer, "path", c.path, "err", err)
			c.shut(fmt.Errorf("control stream write failed: %w", err))
		}
		return fmt.Errorf("send %s to %.16s: %w", m.Kind, c.peer, err)
	}
	return nil
}

func (c *streamConn) Recv() (*messages.Envelope, error) {
	m, bad, err := c.next(c.ctrl)
	if bad != nil {
		c.protocolError(bad)
		return nil, bad
	}
	if err == nil && isReplacedFrame(m) {
		ce := &closeError{reason: ReasonReplaced, peer: true}
		c.shut(ce)
		return nil, ce
	}
	return m, err
}

func (c *streamConn) protocolError(err error) {
	c.log.Warn("closing peer connection: "+frameFault(err), "peer", c.peer, "path", c.path, "err", err)
	c.shut(err)
}

// OpenStream opens a stream, waiting (until ctx ends) while the peer has
// not accepted yamux's AcceptBacklog of the streams opened before: as
// QUIC's OpenStream waits for stream credit. yamux's own OpenStream
// waits for that with no way out but the session's end (a peer that
// never accepts has it closed after StreamOpenTimeout, 75 s), so it runs
// apart; one given up on is closed once it opens.
func (c *streamConn) OpenStream(ctx context.Context) (Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	type opened struct {
		st  *yamux.Stream
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		st, err := c.sess.OpenStream()
		ch <- opened{st, err}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			return nil, o.err
		}
		return &yamuxStream{Stream: o.st}, nil
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.err == nil {
				_ = o.st.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func (c *streamConn) AcceptStream(ctx context.Context) (Stream, error) {
	for {
		st, err := c.sess.AcceptStreamWithContext(ctx)
		if err != nil {
			return nil, err
		}
		if c.openIn.Add(1) > c.cfg.MaxIncomingStreams {
			c.openIn.Add(-1)
			_ = st.Close()
			continue
		}
		return &yamuxStream{Stream: st, open: &c.openIn}, nil
	}
}

// OpenStreams is how many streams the peer opened that are still open.
func (c *streamConn) OpenStreams() int { return c.sess.NumStreams() - 2 }

func (c *streamConn) SendDatagram(b []byte) error {
	if len(b) > maxStreamDatagram {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrDatagramTooLarge, len(b), maxStreamDatagram)
	}
	select {
	case <-c.closed:
		return ErrClosed
	default:
	}
	p := make([]byte, 2+len(b))
	binary.BigEndian.PutUint16(p, uint16(len(b)))
	copy(p[2:], b)
	select {
	case c.dgOut <- p:
	default: // backed up: dropped, as a datagram may be
	}
	return nil
}

func (c *streamConn) writeDatagrams() {
	for {
		select {
		case p := <-c.dgOut:
			_ = c.dgram.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout))
			if _, err := c.dgram.Write(p); err != nil {
				c.shut(fmt.Errorf("datagram stream: %w", err))
				return
			}
		case <-c.closed:
			return
		}
	}
}

func (c *streamConn) readDatagrams() {
	var hdr [2]byte
	for {
		if _, err := io.ReadFull(c.dgram, hdr[:]); err != nil {
			return
		}
		n := int64(binary.BigEndian.Uint16(hdr[:]))
		if c.dgBytes.Load()+n > datagramQueueBytes {
			if _, err := io.CopyN(io.Discard, c.dgram, n); err != nil {
				return
			}
			continue
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(c.dgram, b); err != nil {
			return
		}
		c.dgBytes.Add(n)
		select {
		case c.dgIn <- b:
		default:
			c.dgBytes.Add(-n)
		}
	}
}

func (c *streamConn) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	select {
	case b := <-c.dgIn:
		c.dgBytes.Add(-int64(len(b)))
		return b, nil
	case <-c.closed:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *streamConn) ExportKeyingMaterial(label string, context []byte, length int) ([]byte, error) {
	cs := c.tls.ConnectionState()
	return cs.ExportKeyingMaterial(label, context, length)
}

// yamuxStream gives a yamux stream the Stream contract (see the notes at
// the top of this file on Abort).
type yamuxStream struct {
	*yamux.Stream
	open   *atomic.Int64 // the connection's count of accepted streams
	done   atomic.Bool
	rclose atomic.Bool
}

func (s *yamuxStream) release() {
	if s.open != nil && s.done.CompareAndSwap(false, true) {
		s.open.Add(-1)
	}
}

// CloseWrite sends our FIN; reads go on (yamux's Close is a half-close).
func (s *yamuxStream) CloseWrite() error { return s.Stream.Close() }

// errPathCut is a stream's read error when its connection ended before
// the stream did.
var errPathCut = errors.New("stream path ended before the stream: connection lost")

// Read fails once Close or Abort stopped reading. An end of stream is
// only passed on when the session still runs: yamux ends every stream
// of a session that failed (its byte stream was cut, a relay or
// middlebox ended it, TLS refused a record, keep-alive found it dead)
// with the same clean io.EOF as its writer's FIN, and a reader that took
// it for one (a tunnel passes it on as a half-close) would deliver what
// came before the cut as the whole. The cost is one channel poll per
// stream, at its end. yamux does not say whether a FIN arrived, so a
// stream whose FIN came but whose end is read only after the session
// closed reads the error too: it fails closed, as its connection did.
func (s *yamuxStream) Read(p []byte) (int, error) {
	if s.rclose.Load() {
		return 0, net.ErrClosed
	}
	n, err := s.Stream.Read(p)
	if err == io.EOF && s.Stream.Session().IsClosed() {
		err = errPathCut
	}
	return n, err
}

// Close sends our FIN and stops reading.
func (s *yamuxStream) Close() error {
	s.rclose.Store(true)
	s.release()
	return s.Stream.Close()
}

// Abort ends both directions now. yamux cannot reset a stream, so the
// peer reads a clean end of stream (see the file's notes).
func (s *yamuxStream) Abort() {
	s.rclose.Store(true)
	s.release()
	_ = s.Stream.Close()
}

// frameCoalescer sits between yamux and TLS. yamux writes a data frame
// as two writes, its 12-byte header and then the body; over TLS each
// write is a record of its own and, with TCP_NODELAY or on a relayed
// stream, a packet of its own. The coalescer holds a data frame's header
// and writes it with (the start of) its body. Only yamux's send loop
// writes, so it needs no lock.
// admitGate bounds what an inbound stream path reads from a peer not
// admitted yet (Conn.Admit): at most its budget, then reads wait for
// Admit or the connection's end. yamux has flow control per stream but
// none across the connection, and it holds the data of streams nobody
// accepted (up to AcceptBacklog of them, a 256 KiB window each), while
// the peer layer accepts streams only once it has admitted the peer and
// keys cost nothing: without the gate each pending connection could
// make us hold 64 MiB (MaxPendingInbound of them, 4 GiB). The budget is
// what a QUIC connection takes from a peer not admitted, its initial
// connection window (Config.InitialConnectionReceiveWindow), and the
// wait is what QUIC's flow control makes of it: the peer's sends stall.
// An honest peer's handshake comes first and is far smaller; a peer
// that fills the budget and is never admitted is closed by the pending
// bound's handshake timeout, or by yamux's keep-alive, whose answers
// wait behind the gate.
type admitGate struct {
	left              atomic.Int64  // what may still be read before Admit (by yamux's one reader)
	open              chan struct{} // closed by Admit
	stop              chan struct{} // closed when the connection closes
	admitted, stopped sync.Once
}

func newAdmitGate(budget int64) *admitGate {
	g := &admitGate{open: make(chan struct{}), stop: make(chan struct{})}
	g.left.Store(budget)
	return g
}

func (g *admitGate) admit() { g.admitted.Do(func() { close(g.open) }) }
func (g *admitGate) close() { g.stopped.Do(func() { close(g.stop) }) }

// gatedConn is the byte stream yamux reads an inbound stream path from,
// through its admitGate.
type gatedConn struct {
	*frameCoalescer
	gate *admitGate
}

func (c *gatedConn) Read(p []byte) (int, error) {
	g := c.gate
	select {
	case <-g.open:
		return c.frameCoalescer.Read(p)
	default:
	}
	left := g.left.Load()
	if left <= 0 {
		select {
		case <-g.open:
		case <-g.stop:
			return 0, net.ErrClosed
		}
		return c.frameCoalescer.Read(p)
	}
	n, err := c.frameCoalescer.Read(p[:min(int64(len(p)), left)])
	g.left.Add(int64(-n))
	return n, err
}

func (c *gatedConn) Close() error {
	c.gate.close()
	return c.frameCoalescer.Close()
}

type frameCoalescer struct {
	*tls.Conn
	heard atomic.Int64 // unix nanoseconds of the last byte read (keepAlive)
	hdr   [12]byte
	held  bool
	buf   []byte
}

// coalesceMax bounds the body bytes copied behind a held header.
const coalesceMax = 32 << 10

func (c *frameCoalescer) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.heard.Store(time.Now().UnixNano())
	}
	return n, err
}

func (c *frameCoalescer) Write(p []byte) (int, error) {
	// Header: version, type (0 = data), flags, stream id, length.
	if !c.held && len(p) == 12 && p[1] == 0 && binary.BigEndian.Uint32(p[8:]) > 0 {
		copy(c.hdr[:], p)
		c.held = true
		return len(p), nil
	}
	if !c.held {
		return c.Conn.Write(p)
	}
	c.held = false
	n := min(len(p), coalesceMax)
	c.buf = append(append(c.buf[:0], c.hdr[:]...), p[:n]...)
	if _, err := c.Conn.Write(c.buf); err != nil {
		return 0, err
	}
	if n == len(p) {
		return n, nil
	}
	m, err := c.Conn.Write(p[n:])
	return n + m, err
}
