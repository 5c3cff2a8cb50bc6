package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// MultiEndpoint is a node's Endpoint with every path: QUIC on the UDP
// socket (quic.go), the same peer protocol over TCP+TLS on the same port
// number (for networks that drop UDP), and connections relayed through a
// connected peer (relay.go). Accept returns inbound connections of any
// path; Dial tries QUIC first and TCP after a head start (Options.TCPDelay)
// or at once when QUIC failed, and keeps whichever is up first.
//
// The TCP listener takes the UDP socket's port number: operators open one
// port, for both protocols, in their firewalls.
type MultiEndpoint struct {
	q        *QUICEndpoint
	cfg      Config
	opt      Options
	cert     tls.Certificate
	log      *slog.Logger
	tln      net.Listener // nil when TCP is off
	accepted chan Conn
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	garbage      atomic.Int64 // TCP connections that failed the TLS handshake
	refused      atomic.Int64 // TCP connections refused at the pending cap
	tcpIn        atomic.Int64 // TCP connections accepted (handshake done)
	tcpDials     atomic.Int64 // outbound connections that ended on TCP
	quicUpgrades atomic.Int64 // QUIC connections that came up after TCP won their dial

	relay *relayState
}

var _ Endpoint = (*MultiEndpoint)(nil)

// Options are the paths beyond QUIC. Zero values take the defaults.
type Options struct {
	// NoTCP turns the TCP listener and TCP dials off.
	NoTCP bool
	// TCPDelay is QUIC's head start before a dial also tries TCP
	// [500ms]. Short, as in Happy Eyeballs: where UDP is dropped every
	// join and redial waits this long, and where QUIC works but TCP wins
	// the race (a slow or lossy first flight) the late QUIC connection is
	// still taken and the peer moves to it, so losing the race costs
	// little.
	TCPDelay time.Duration
	// Relay configures relaying (relay.go).
	Relay RelayConfig
}

// ListenMulti opens the QUIC endpoint and, unless opt.NoTCP, a TCP
// listener on the same address and port. When cfg.ListenAddr asks for any
// port (":0"), a port free for both protocols is looked for.
func ListenMulti(cfg Config, opt Options) (*MultiEndpoint, error) {
	if opt.TCPDelay <= 0 {
		opt.TCPDelay = 500 * time.Millisecond
	}
	var (
		q   *QUICEndpoint
		tln net.Listener
		err error
	)
	for try := 0; ; try++ {
		q, err = Listen(cfg)
		if err != nil {
			return nil, err
		}
		if opt.NoTCP {
			break
		}
		ua := q.Addr().(*net.UDPAddr)
		tln, err = net.ListenTCP("tcp", &net.TCPAddr{IP: ua.IP, Port: ua.Port, Zone: ua.Zone})
		if err == nil {
			break
		}
		_ = q.Close()
		_, port, _ := net.SplitHostPort(cfg.ListenAddr)
		if port != "0" || try >= 8 {
			return nil, fmt.Errorf("listen p2p tcp %s: %w", ua, err)
		}
	}
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	e := &MultiEndpoint{
		q: q, cfg: cfg, opt: opt, cert: q.cert, log: cfg.Logger, tln: tln,
		accepted: make(chan Conn), ctx: ctx, cancel: cancel,
	}
	e.relay = newRelayState(e, opt.Relay)
	e.wg.Add(1)
	go e.pumpQUIC()
	if tln != nil {
		e.wg.Add(1)
		go e.acceptTCP()
	}
	return e, nil
}

// QUIC is the endpoint's QUIC half.
func (e *MultiEndpoint) QUIC() *QUICEndpoint { return e.q }

// ID is the local peer id.
func (e *MultiEndpoint) ID() string { return e.q.ID() }

// Addr is the UDP address (the TCP listener has the same one).
func (e *MultiEndpoint) Addr() net.Addr { return e.q.Addr() }

// TCPAddr is the TCP listener's address (nil when TCP is off).
func (e *MultiEndpoint) TCPAddr() net.Addr {
	if e.tln == nil {
		return nil
	}
	return e.tln.Addr()
}

// RefusedInbound counts inbound connections of every path refused at the
// pending cap.
func (e *MultiEndpoint) RefusedInbound() int64 {
	return e.q.RefusedInbound() + e.refused.Load() + e.relay.inRefused.Load()
}

// PathStats are the counters of the TCP and relay paths.
type PathStats struct {
	TCPAccepted    int64 `json:"tcpAccepted"`
	TCPDialed      int64 `json:"tcpDialed"`
	QUICUpgrades   int64 `json:"quicUpgrades"`
	TCPRefused     int64 `json:"tcpRefused"`      // TCP connections refused at the pending cap (relayed ones: RelayedInRefused)
	TCPBadHandsake int64 `json:"tcpBadHandshake"` // closed: not TLS 1.3 with a valid peer certificate (garbage)
	SendLosses     int64 `json:"sendLosses"`      // UDP datagrams the host refused to send, counted as lost
	UDPGRO         bool  `json:"udpGro"`          // the QUIC socket reads datagrams the kernel merged
	GROMerged      int64 `json:"groMerged"`       // merged datagrams read (each several QUIC packets)
	RelayStats
}

// Stats returns the TCP and relay counters.
func (e *MultiEndpoint) Stats() PathStats {
	gro, merged := e.q.GRO()
	return PathStats{
		UDPGRO: gro, GROMerged: merged,
		TCPAccepted: e.tcpIn.Load(), TCPDialed: e.tcpDials.Load(), QUICUpgrades: e.quicUpgrades.Load(), TCPRefused: e.refused.Load(),
		TCPBadHandsake: e.garbage.Load(), SendLosses: e.q.SendLosses(), RelayStats: e.relay.stats(),
	}
}

func (e *MultiEndpoint) pumpQUIC() {
	defer e.wg.Done()
	for {
		c, err := e.q.Accept(e.ctx)
		if err != nil {
			return
		}
		if !e.deliver(c) {
			return
		}
	}
}

// deliver hands an inbound connection to Accept (false: endpoint closed).
func (e *MultiEndpoint) deliver(c Conn) bool {
	select {
	case e.accepted <- c:
		return true
	case <-e.ctx.Done():
		_ = c.Close("endpoint closed")
		return false
	}
}

// takeSlot holds a place under MaxPendingInbound for an inbound stream
// path connection (nil: refused, counted).
func (e *MultiEndpoint) takeSlot() *pendingSlot {
	g := e.q.pending
	if g.pending.Add(1) > g.max {
		g.pending.Add(-1)
		return nil
	}
	return &pendingSlot{gate: g}
}

func (e *MultiEndpoint) acceptTCP() {
	defer e.wg.Done()
	for {
		raw, err := e.tln.Accept()
		if err != nil {
			if e.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			if !Wait(e.ctx, 50*time.Millisecond) { // EMFILE and the like
				return
			}
			continue
		}
		slot := e.takeSlot()
		if slot == nil {
			e.refused.Add(1)
			_ = raw.Close()
			continue
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.inboundStream(raw, slot, PathTCP, "", "", &e.garbage, &e.tcpIn)
		}()
	}
}

// inboundStream runs the acceptor's side of a stream path over raw and
// hands the connection to Accept. claimed, when set, is the key the
// peer must prove (a relay said who is calling). bad counts a failed
// handshake, ok a connection delivered.
func (e *MultiEndpoint) inboundStream(raw net.Conn, slot *pendingSlot, path, via, claimed string, bad, ok *atomic.Int64) {
	if tc, isTCP := raw.(*net.TCPConn); isTCP {
		_ = tc.SetKeepAlive(true)
		_ = tc.SetKeepAlivePeriod(e.cfg.KeepAlive)
	}
	c, err := newStreamConn(e.ctx, raw, false, e.cert, e.ID(), "", &e.cfg, path, via)
	if err != nil {
		slot.release()
		bad.Add(1)
		e.log.Debug("inbound peer connection dropped", "path", path, "remote", raw.RemoteAddr().String(), "err", err)
		return
	}
	if claimed != "" && c.peer != claimed {
		slot.release()
		bad.Add(1)
		c.shut(errors.New("relayed peer is not who the relay announced"))
		e.log.Warn("relayed connection dropped: the peer is not who the relay announced", "via", via)
		return
	}
	c.slot = slot
	go func() { <-c.Done(); slot.release() }()
	e.track(c)
	ok.Add(1)
	e.deliver(c)
}

// Dial connects to addr by QUIC, or by TCP when QUIC has not connected
// within Options.TCPDelay or failed; the first up is returned. When TCP
// wins while QUIC is still trying, QUIC goes on until its handshake
// timeout: if it then connects, it is handed to Accept, where the peer
// layer ranks it above the TCP connection and moves to it (a slow first
// handshake must not leave two peers on TCP for good). A late TCP
// connection is closed.
func (e *MultiEndpoint) Dial(ctx context.Context, addr, peerID string) (Conn, error) {
	if e.ctx.Err() != nil {
		return nil, ErrClosed
	}
	if e.tln == nil {
		return e.q.Dial(ctx, addr, peerID)
	}
	// QUIC outlives the caller's context once TCP has won, so its own
	// context is bounded by the handshake timeout and the endpoint.
	qctx, qcancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.HandshakeTimeout)
	stopQ := context.AfterFunc(e.ctx, qcancel)
	quicDone := make(chan dialResult, 1)
	go func() {
		defer stopQ()
		defer qcancel()
		c, err := e.q.Dial(qctx, addr, peerID)
		quicDone <- dialResult{c, err}
	}()
	tctx, tcancel := context.WithCancel(ctx)
	defer tcancel()
	tcpDone := make(chan dialResult, 1)
	tcpStarted := false
	startTCP := func() {
		tcpStarted = true
		go func() {
			c, err := e.DialTCP(tctx, addr, peerID)
			tcpDone <- dialResult{c, err}
		}()
	}
	head := time.NewTimer(e.opt.TCPDelay)
	defer head.Stop()
	var errs []error
	quicPending, tcpPending := true, false
	for {
		select {
		case <-head.C:
			if !tcpStarted {
				startTCP()
				tcpPending = true
			}
		case <-ctx.Done():
			qcancel()
			if quicPending {
				go closeLate(quicDone)
			}
			if tcpPending {
				go closeLate(tcpDone)
			}
			return nil, ctx.Err()
		case r := <-quicDone:
			quicPending = false
			if r.err == nil {
				if tcpPending {
					tcancel()
					go closeLate(tcpDone)
				}
				return r.c, nil
			}
			errs = append(errs, r.err)
			if errors.Is(r.err, ErrSelf) || errors.Is(r.err, ErrWrongPeer) {
				if tcpPending {
					tcancel()
					go closeLate(tcpDone)
				}
				return nil, r.err
			}
			if !tcpStarted {
				startTCP()
				tcpPending = true
			}
		case r := <-tcpDone:
			tcpPending = false
			if r.err == nil {
				e.tcpDials.Add(1)
				if quicPending {
					go e.upgradeLate(quicDone)
				}
				return r.c, nil
			}
			errs = append(errs, r.err)
		}
		if !quicPending && !tcpPending && tcpStarted {
			return nil, errors.Join(errs...)
		}
	}
}

type dialResult struct {
	c   Conn
	err error
}

// closeLate closes a dial's connection that got through after the dial
// was decided.
func closeLate(ch <-chan dialResult) {
	if r := <-ch; r.err == nil {
		_ = r.c.Close("duplicate path")
	}
}

// upgradeLate hands a QUIC connection that got through after TCP won to
// Accept (see Dial).
func (e *MultiEndpoint) upgradeLate(ch <-chan dialResult) {
	if r := <-ch; r.err == nil {
		e.quicUpgrades.Add(1)
		e.deliver(r.c)
	}
}

// DialQUIC connects to addr over QUIC only (a peer on TCP re-tried over
// QUIC).
func (e *MultiEndpoint) DialQUIC(ctx context.Context, addr, peerID string) (Conn, error) {
	return e.q.Dial(ctx, addr, peerID)
}

// DialTCP connects to addr over TCP only.
func (e *MultiEndpoint) DialTCP(ctx context.Context, addr, peerID string) (Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.HandshakeTimeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial tcp %s: %w", addr, err)
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetKeepAlive(true)
		_ = tc.SetKeepAlivePeriod(e.cfg.KeepAlive)
	}
	c, err := newStreamConn(ctx, raw, true, e.cert, e.ID(), peerID, &e.cfg, PathTCP, "")
	if err != nil {
		return nil, fmt.Errorf("dial tcp %s: %w", addr, err)
	}
	e.track(c)
	return c, nil
}

// track closes c when the endpoint closes.
func (e *MultiEndpoint) track(c *streamConn) {
	go func() {
		select {
		case <-c.Done():
		case <-e.ctx.Done():
			c.shut(ErrClosed)
		}
	}()
}

// Accept returns the next inbound connection of any path.
func (e *MultiEndpoint) Accept(ctx context.Context) (Conn, error) {
	return nextAccepted(ctx, e.ctx, e.accepted)
}

// Close stops every path and closes every connection.
func (e *MultiEndpoint) Close() error {
	if e.ctx.Err() != nil {
		return nil
	}
	e.cancel()
	if e.tln != nil {
		_ = e.tln.Close()
	}
	err := e.q.Close()
	e.relay.close()
	e.wg.Wait()
	return err
}
