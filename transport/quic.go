package transport

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"peerdns/messages"
	"peerdns/transport/identity"
)

// Application error codes sent when we close a connection.
const (
	CodeNormal   quic.ApplicationErrorCode = 0
	CodeBadFrame quic.ApplicationErrorCode = 0x10 // undecodable or invalid frame
	CodeTooLarge quic.ApplicationErrorCode = 0x11 // frame over MaxFrameSize
	CodeNoStream quic.ApplicationErrorCode = 0x12 // no control stream in time
	CodeSelf     quic.ApplicationErrorCode = 0x13 // we dialed ourselves
	CodeWrite    quic.ApplicationErrorCode = 0x14 // control stream write failed
	CodeStalled  quic.ApplicationErrorCode = 0x15 // a frame begun and not finished in time
	CodeReplaced quic.ApplicationErrorCode = 0x16 // another connection to the peer kept in its place (ReasonReplaced)
)

// ControlPreface opens the control stream; it makes the stream visible to
// the acceptor at once and tells it this is a peerdns control stream, not
// a tunnel stream.
const ControlPreface = "PDN1"

var preface = []byte(ControlPreface)

// Config configures a QUIC endpoint. Zero durations take the defaults.
type Config struct {
	Identity   *identity.Identity
	ListenAddr string       // UDP address, e.g. "0.0.0.0:7740" or "127.0.0.1:0"
	Logger     *slog.Logger // nil: slog.Default()
	// KeepAlive is how often an idle connection sends a keep-alive (5s).
	KeepAlive time.Duration
	// IdleTimeout closes a connection that heard nothing for this long (20s).
	IdleTimeout time.Duration
	// HandshakeTimeout bounds dial, TLS and control-stream set-up (10s).
	HandshakeTimeout time.Duration
	// WriteTimeout bounds one control-frame write (10s); a peer that does
	// not read for that long is disconnected.
	WriteTimeout time.Duration
	// FrameTimeout is the least time a control frame has from its first
	// byte to its last [DefaultFrameTimeout]; its declared size adds the
	// time a 64 kbit/s link takes to carry it. A peer that begins a frame
	// and does not finish it in time is disconnected (ErrFrameStalled).
	FrameTimeout time.Duration
	// MaxPendingInbound bounds the inbound connections not admitted yet
	// (Conn.Admit): in the QUIC/TLS handshake, opening the control stream
	// or in the peer handshake above [DefaultMaxPendingInbound]. More are
	// refused with CONNECTION_REFUSED at their first packet and counted
	// (RefusedInbound), so unknown keys cannot pin CPU and memory; once
	// half are taken, new clients must also prove their source address
	// (a QUIC Retry). Dialed and admitted connections never count.
	MaxPendingInbound int
	// MaxIncomingStreams caps the bidirectional streams one peer may have
	// open towards us at once, the control stream included
	// [DefaultMaxIncomingStreams]. quic-go enforces it with QUIC stream
	// credit: at the cap the peer's OpenStreamSync waits until one of its
	// streams is finished (both directions closed, or reset), so a peer
	// cannot make us hold more than this many tunnel streams.
	MaxIncomingStreams int64

	// Flow-control windows. A window caps one stream's (or one
	// connection's) throughput at window/RTT: quic-go's defaults (6 MiB
	// per stream, 15 MiB per connection) hold a tunnel to ~1 Gb/s at
	// 50 ms, and every tunnel stream of a peer shares its connection's
	// window. quic-go starts at the initial window and grows it only while
	// the application reads fast enough, so the larger maxima cost memory
	// only on streams that are actually moving data; what a peer can make
	// us buffer is bounded by the connection window.
	//
	// InitialStreamReceiveWindow [512 KiB], MaxStreamReceiveWindow
	// [DefaultMaxStreamReceiveWindow], InitialConnectionReceiveWindow
	// [1 MiB], MaxConnectionReceiveWindow [DefaultMaxConnectionReceiveWindow].
	InitialStreamReceiveWindow     uint64
	MaxStreamReceiveWindow         uint64
	InitialConnectionReceiveWindow uint64
	MaxConnectionReceiveWindow     uint64
}

// Defaults of the stream cap and flow-control windows (see Config).
const (
	DefaultMaxIncomingStreams         = 1024
	DefaultMaxStreamReceiveWindow     = 16 << 20
	DefaultMaxConnectionReceiveWindow = 64 << 20
)

func (c *Config) defaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = 5 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 20 * time.Second
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.FrameTimeout <= 0 {
		c.FrameTimeout = DefaultFrameTimeout
	}
	if c.MaxPendingInbound <= 0 {
		c.MaxPendingInbound = DefaultMaxPendingInbound
	}
	if c.MaxIncomingStreams <= 0 {
		c.MaxIncomingStreams = DefaultMaxIncomingStreams
	}
	def := func(v *uint64, x uint64) {
		if *v == 0 {
			*v = x
		}
	}
	def(&c.InitialStreamReceiveWindow, 512<<10)
	def(&c.MaxStreamReceiveWindow, DefaultMaxStreamReceiveWindow)
	def(&c.InitialConnectionReceiveWindow, 1<<20)
	def(&c.MaxConnectionReceiveWindow, DefaultMaxConnectionReceiveWindow)
	// quic-go refuses nothing here: an initial window above the maximum
	// would simply never grow. Keep them ordered.
	c.InitialStreamReceiveWindow = min(c.InitialStreamReceiveWindow, c.MaxStreamReceiveWindow)
	c.InitialConnectionReceiveWindow = min(c.InitialConnectionReceiveWindow, c.MaxConnectionReceiveWindow)
}

// QUICEndpoint is the quic-go Endpoint: one UDP socket, one quic.Transport
// that both listens and dials, so the address peers see when we dial them
// is the address they can dial back.
type QUICEndpoint struct {
	cfg      Config
	log      *slog.Logger
	cert     tls.Certificate
	udp      *net.UDPConn
	lossy    *lossyConn // udp as quic-go writes through it (sendloss.go)
	tr       *quic.Transport
	ln       *quic.Listener
	qconf    *quic.Config
	pending  *pendingGate
	accepted chan *quicConn
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

var _ Endpoint = (*QUICEndpoint)(nil)

// Listen opens the UDP socket and starts accepting connections.
func Listen(cfg Config) (*QUICEndpoint, error) {
	if cfg.Identity == nil {
		return nil, errors.New("transport: no identity")
	}
	cfg.defaults()
	cert, err := selfSigned(cfg.Identity)
	if err != nil {
		return nil, err
	}
	ua, err := net.ResolveUDPAddr("udp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("p2p address %q: %w", cfg.ListenAddr, err)
	}
	udp, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("listen p2p %s: %w", cfg.ListenAddr, err)
	}
	// The stateless reset key is derived from the identity so a restarted
	// node resets connections its previous run left open on peers at the
	// next packet, instead of them waiting for the idle timeout. Ed25519
	// signatures are deterministic and only this key can make this one.
	rk := quic.StatelessResetKey(sha256.Sum256(cfg.Identity.Sign([]byte("peerdns stateless reset key v1"))))
	pending := &pendingGate{max: int64(cfg.MaxPendingInbound), log: cfg.Logger}
	lossy := newLossyConn(udp, cfg.Logger)
	tr := &quic.Transport{
		Conn: lossy, StatelessResetKey: &rk,
		ConnContext: pending.connContext, VerifySourceAddress: pending.verifySource,
	}
	qconf := &quic.Config{
		HandshakeIdleTimeout: cfg.HandshakeTimeout,
		MaxIdleTimeout:       cfg.IdleTimeout,
		KeepAlivePeriod:      cfg.KeepAlive,
		EnableDatagrams:      true,
		// RESET_STREAM_AT: Abort delivers what was written before it
		// (see quicStream.Abort).
		EnableStreamResetPartialDelivery: true,
		MaxIncomingStreams:               cfg.MaxIncomingStreams,
		// Nothing of ours uses unidirectional streams; 0 would mean
		// quic-go's default of 100, a negative value means none.
		MaxIncomingUniStreams:          -1,
		InitialStreamReceiveWindow:     cfg.InitialStreamReceiveWindow,
		MaxStreamReceiveWindow:         cfg.MaxStreamReceiveWindow,
		InitialConnectionReceiveWindow: cfg.InitialConnectionReceiveWindow,
		MaxConnectionReceiveWindow:     cfg.MaxConnectionReceiveWindow,
	}
	ln, err := tr.Listen(serverTLS(cert), qconf)
	if err != nil {
		udp.Close()
		return nil, fmt.Errorf("quic listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &QUICEndpoint{
		cfg: cfg, log: cfg.Logger, cert: cert, udp: udp, lossy: lossy, tr: tr, ln: ln, qconf: qconf, pending: pending,
		accepted: make(chan *quicConn), ctx: ctx, cancel: cancel,
	}
	e.wg.Add(1)
	go e.acceptLoop()
	return e, nil
}

// ID is the local peer id.
func (e *QUICEndpoint) ID() string { return e.cfg.Identity.ID() }

// Addr is the bound UDP address.
func (e *QUICEndpoint) Addr() net.Addr { return e.udp.LocalAddr() }

// RefusedInbound counts inbound connections refused because
// MaxPendingInbound were already waiting to be admitted.
func (e *QUICEndpoint) RefusedInbound() int64 { return e.pending.refused.Load() }

func (e *QUICEndpoint) acceptLoop() {
	defer e.wg.Done()
	for {
		qc, err := e.ln.Accept(e.ctx)
		if err != nil {
			return
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			c, err := e.setupInbound(qc)
			if err != nil {
				e.log.Warn("inbound peer connection dropped", "remote", qc.RemoteAddr().String(), "err", err)
				return
			}
			select {
			case e.accepted <- c:
			case <-e.ctx.Done():
				c.Close("endpoint closed")
			}
		}()
	}
}

func (e *QUICEndpoint) setupInbound(qc *quic.Conn) (*quicConn, error) {
	certs := qc.ConnectionState().TLS.PeerCertificates
	raw := make([][]byte, len(certs))
	for i, c := range certs {
		raw[i] = c.Raw
	}
	peer, err := peerIDFromCerts(raw)
	if err != nil {
		_ = qc.CloseWithError(CodeBadFrame, "bad certificate")
		return nil, err
	}
	ctx, cancel := context.WithTimeout(e.ctx, e.cfg.HandshakeTimeout)
	defer cancel()
	st, err := qc.AcceptStream(ctx)
	if err != nil {
		_ = qc.CloseWithError(CodeNoStream, "no control stream")
		return nil, fmt.Errorf("peer %.16s: no control stream: %w", peer, err)
	}
	_ = st.SetReadDeadline(time.Now().Add(e.cfg.HandshakeTimeout))
	got := make([]byte, len(preface))
	if _, err := io.ReadFull(st, got); err != nil || string(got) != string(preface) {
		_ = qc.CloseWithError(CodeBadFrame, "bad control stream preface")
		return nil, fmt.Errorf("peer %.16s: bad control stream preface", peer)
	}
	_ = st.SetReadDeadline(time.Time{})
	c := e.newConn(qc, st, peer, false)
	c.slot = slotOf(qc)
	return c, nil
}

// Dial connects to addr and opens the control stream.
func (e *QUICEndpoint) Dial(ctx context.Context, addr, peerID string) (Conn, error) {
	if e.ctx.Err() != nil {
		return nil, ErrClosed
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("peer address %q: %w", addr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.HandshakeTimeout)
	defer cancel()
	qc, err := e.tr.Dial(ctx, ua, clientTLS(e.cert, peerID), e.qconf)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	certs := qc.ConnectionState().TLS.PeerCertificates
	if len(certs) != 1 {
		_ = qc.CloseWithError(CodeBadFrame, "bad certificate")
		return nil, fmt.Errorf("dial %s: no peer certificate", addr)
	}
	peer, err := peerIDFromCerts([][]byte{certs[0].Raw})
	if err != nil {
		_ = qc.CloseWithError(CodeBadFrame, "bad certificate")
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if peer == e.ID() {
		_ = qc.CloseWithError(CodeSelf, "dialed self")
		return nil, fmt.Errorf("dial %s: %w", addr, ErrSelf)
	}
	st, err := qc.OpenStreamSync(ctx)
	if err != nil {
		_ = qc.CloseWithError(CodeNoStream, "cannot open control stream")
		return nil, fmt.Errorf("dial %s: control stream: %w", addr, err)
	}
	_ = st.SetWriteDeadline(time.Now().Add(e.cfg.HandshakeTimeout))
	if _, err := st.Write(preface); err != nil {
		_ = qc.CloseWithError(CodeNoStream, "cannot write control stream")
		return nil, fmt.Errorf("dial %s: control stream: %w", addr, err)
	}
	_ = st.SetWriteDeadline(time.Time{})
	return e.newConn(qc, st, peer, true), nil
}

// ErrSelf reports a dial that reached this very node.
var ErrSelf = errors.New("address belongs to this node")

// Accept returns the next inbound connection.
func (e *QUICEndpoint) Accept(ctx context.Context) (Conn, error) {
	return nextAccepted(ctx, e.ctx, e.accepted)
}

// nextAccepted waits for the next connection on accepted, until the
// endpoint's life (ErrClosed) or the caller's ctx ends.
func nextAccepted[C Conn](ctx, life context.Context, accepted <-chan C) (Conn, error) {
	select {
	case c := <-accepted:
		return c, nil
	case <-life.Done():
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops accepting, closes every connection and the socket.
func (e *QUICEndpoint) Close() error {
	if e.ctx.Err() != nil {
		return nil
	}
	e.cancel()
	_ = e.ln.Close()
	err := e.tr.Close()
	_ = e.udp.Close()
	e.wg.Wait()
	return err
}

func (e *QUICEndpoint) newConn(qc *quic.Conn, st *quic.Stream, peer string, outbound bool) *quicConn {
	return &quicConn{qc: qc, ctrl: st, peer: peer, outbound: outbound, log: e.log, writeTimeout: e.cfg.WriteTimeout,
		frameReader: frameReader{timeout: e.cfg.FrameTimeout}}
}

// quicConn is a Conn over a quic-go connection.
type quicConn struct {
	qc           *quic.Conn
	ctrl         *quic.Stream
	peer         string
	outbound     bool
	log          *slog.Logger
	writeTimeout time.Duration

	// slot is the place an inbound connection holds under
	// MaxPendingInbound until Admit (nil when dialed).
	slot *pendingSlot

	wmu sync.Mutex // serialises frame writes
	frameReader
}

var _ Conn = (*quicConn)(nil)

func (c *quicConn) PeerID() string       { return c.peer }
func (c *quicConn) Outbound() bool       { return c.outbound }
func (c *quicConn) LocalAddr() net.Addr  { return c.qc.LocalAddr() }
func (c *quicConn) RemoteAddr() net.Addr { return c.qc.RemoteAddr() }
func (c *quicConn) Done() <-chan struct{} {
	return c.qc.Context().Done()
}

func (c *quicConn) Err() error {
	if c.qc.Context().Err() == nil {
		return nil
	}
	return context.Cause(c.qc.Context())
}

func (c *quicConn) Send(m *messages.Envelope) error {
	b, err := EncodeFrame(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ctrl.SetWriteDeadline(time.Now().Add(c.writeTimeout))
	if _, err := c.ctrl.Write(b); err != nil {
		if c.qc.Context().Err() == nil {
			c.log.Warn("closing peer connection: control write failed", "peer", c.peer, "err", err)
			_ = c.qc.CloseWithError(CodeWrite, "control stream write failed")
		}
		return fmt.Errorf("send %s to %.16s: %w", m.Kind, c.peer, err)
	}
	return nil
}

func (c *quicConn) Recv() (*messages.Envelope, error) {
	m, bad, err := c.next(c.ctrl)
	if bad != nil {
		code := CodeBadFrame
		switch {
		case errors.Is(bad, ErrFrameTooLarge):
			code = CodeTooLarge
		case errors.Is(bad, ErrFrameStalled):
			code = CodeStalled
		}
		c.protocolError(code, bad)
		return nil, bad
	}
	return m, err
}

func (c *quicConn) protocolError(code quic.ApplicationErrorCode, err error) {
	c.log.Warn("closing peer connection: "+frameFault(err), "peer", c.peer, "remote", c.RemoteAddr().String(), "err", err)
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	_ = c.qc.CloseWithError(code, msg)
}

// OpenStream waits (until ctx ends) for stream credit when the peer's
// MaxIncomingStreams are all open, instead of failing at once as
// OpenStream would.
func (c *quicConn) OpenStream(ctx context.Context) (Stream, error) {
	st, err := c.qc.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	return newQUICStream(st), nil
}

func (c *quicConn) AcceptStream(ctx context.Context) (Stream, error) {
	st, err := c.qc.AcceptStream(ctx)
	if err != nil {
		return nil, err
	}
	return newQUICStream(st), nil
}

// quicStream gives a quic-go stream the Stream contract. quic-go's own
// Close ends the send direction only: a stream closed that way while the
// peer keeps writing would go on filling our receive window and counting
// against MaxIncomingStreams. So Close here also stops reading.
//
// Writes set the stream's send order (sendOrder, priority.go) and let
// the writers waiting to run write before the connection sends
// (writersFirst).
type quicStream struct {
	*quic.Stream
	order *sendOrder
}

var _ Stream = quicStream{}

func newQUICStream(st *quic.Stream) quicStream {
	return quicStream{Stream: st, order: newSendOrder(st)}
}

// Write writes b, the stream's priority set for the burst it is part of.
func (s quicStream) Write(b []byte) (int, error) {
	s.order.before(len(b))
	n, err := s.Stream.Write(b)
	s.order.after()
	writersFirst()
	return n, err
}

// CloseWrite sends our FIN; reads go on.
func (s quicStream) CloseWrite() error { return s.Stream.Close() }

// Close sends our FIN and stops reading: a no-op for the read side when
// the peer's FIN was read already; otherwise the peer is told
// (STOP_SENDING) and the stream is freed now.
func (s quicStream) Close() error {
	err := s.Stream.Close()
	s.CancelRead(StreamRefused)
	return err
}

// Abort resets both directions (RESET_STREAM and STOP_SENDING with
// StreamRefused): the peer's reads and writes fail. What was written
// before still reaches the peer's reads, then the failure, as bytes a
// TCP connection sent before its reset do (RESET_STREAM_AT, draft-ietf-
// quic-reliable-stream-reset, when the peer supports it; every node
// does): a tunnel whose local side sent an answer and then reset (an
// upstream refusing an upload it did not read) delivers the answer.
func (s quicStream) Abort() {
	s.SetReliableBoundary()
	s.CancelWrite(StreamRefused)
	s.CancelRead(StreamRefused)
}

// StreamRefused is the QUIC stream error code of Stream.Abort and of
// Close's STOP_SENDING.
const StreamRefused quic.StreamErrorCode = 0x20

// ResetStream ends both directions of s at once (Stream.Abort). A QUIC
// stream's credit then comes back to the peer, which sees an error.
func ResetStream(s Stream) { s.Abort() }

func (c *quicConn) SendDatagram(b []byte) error {
	err := c.qc.SendDatagram(b)
	var tl *quic.DatagramTooLargeError
	if errors.As(err, &tl) {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrDatagramTooLarge, len(b), tl.MaxDatagramPayloadSize)
	}
	return err
}

func (c *quicConn) ExportKeyingMaterial(label string, context []byte, length int) ([]byte, error) {
	cs := c.qc.ConnectionState().TLS
	return cs.ExportKeyingMaterial(label, context, length)
}

func (c *quicConn) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	return c.qc.ReceiveDatagram(ctx)
}

func (c *quicConn) Admit() {
	if c.slot != nil {
		c.slot.release()
	}
}

func (c *quicConn) Close(reason string) error {
	if reason == ReasonReplaced {
		return c.qc.CloseWithError(CodeReplaced, reason)
	}
	return c.qc.CloseWithError(CodeNormal, reason)
}
