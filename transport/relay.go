package transport

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Relays. When two peers cannot reach each other directly, one of them
// (B) asks a peer both are connected to (the relay, R) to join it to the
// other (C):
//
//  1. B opens a stream of kind StreamRelay on its connection to R and
//     writes 'C' and C's 32-byte key.
//  2. R checks that relaying is on, that B is a writer of the network,
//     that it has budget, and that B and C are connected to it directly
//     (no chains); it opens a stream of kind StreamRelay to C and writes
//     'I' and B's key. C answers one status byte, and R passes it (or
//     its own refusal) back to B.
//  3. From then on R copies bytes both ways, within its byte rate, and
//     nothing else: B and C run the stream path (streamconn.go) over
//     the relayed bytes, TLS 1.3 between their own certificates, so R
//     cannot read them, and a byte it changes fails the TLS record and
//     closes the connection (fail closed). B checks C's key as in any
//     dial; C checks that the key B proves is the one R announced.
//
// Every node accepts relayed connections; relaying for others is on by
// default and has caps (RelayConfig).

// StreamRelay is the stream kind of relay requests and relayed streams.
const StreamRelay byte = 3

// Relay status codes (the one byte a relay or a relayed peer answers).
const (
	RelayOK        byte = 0
	RelayOff       byte = 1 // relaying is off on this node
	RelayNotWriter byte = 2 // the requester is not a writer of the network
	RelayBusy      byte = 3 // at the connection cap
	RelayNoTarget  byte = 4 // the target is not connected to the relay
	RelayRefused   byte = 5 // the target refused (full, or relaying to itself)
	RelayBad       byte = 6 // malformed request, or one over a relayed connection
)

// RelayError is a relay's refusal.
type RelayError struct{ Code byte }

func (e *RelayError) Error() string {
	switch e.Code {
	case RelayOff:
		return "relay: relaying is off on the relay"
	case RelayNotWriter:
		return "relay: not a writer of the network"
	case RelayBusy:
		return "relay: at its connection budget"
	case RelayNoTarget:
		return "relay: target not connected to the relay"
	case RelayRefused:
		return "relay: target refused"
	}
	return fmt.Sprintf("relay: refused (code %d)", e.Code)
}

// RelayConfig configures relaying for others. Zero values take the
// defaults in brackets.
type RelayConfig struct {
	// Off: this node relays for nobody (it can still use relays).
	Off bool
	// MaxConns caps the relayed connections at once [64]; more are
	// refused (RelayBusy) and counted.
	MaxConns int
	// MaxConnsPerPeer caps those one requester holds at once [8].
	MaxConnsPerPeer int
	// Rate caps the bytes per second through this relay, both ways and
	// all connections together [50 MB/s]; a copy over it waits (the pair
	// is slowed, counted). Negative: no cap.
	Rate float64
	// IsWriter says whether a peer may use this relay (nil: nobody may).
	IsWriter func(peerID string) bool
	// Conn finds the established connection to a peer (the Mesh's; nil:
	// this node relays for nobody).
	Conn func(peerID string) (Conn, bool)
	// TamperAfter, for fault tests only, makes this relay corrupt what it
	// relays: once a direction of a relayed connection has carried this
	// many bytes, every later chunk it copies has one byte flipped (0:
	// never). The pair's TLS then fails the connection, as it would with
	// a hostile relay.
	TamperAfter int64
}

// Defaults of RelayConfig.
const (
	DefaultRelayMaxConns        = 64
	DefaultRelayMaxConnsPerPeer = 8
	DefaultRelayRate            = 50e6
)

// RelayStats are a relay's counters.
type RelayStats struct {
	RelayActive        int64 `json:"relayActive"`        // relayed connections open through us now
	RelayServed        int64 `json:"relayServed"`        // relayed connections set up through us
	RelayBytes         int64 `json:"relayBytes"`         // bytes copied
	RelaySlowed        int64 `json:"relaySlowed"`        // copies that waited for the byte-rate cap
	RelayRefusedBusy   int64 `json:"relayRefusedBusy"`   // requests refused at the connection caps
	RelayRefusedWriter int64 `json:"relayRefusedWriter"` // requests from peers that are not writers
	RelayRefusedOther  int64 `json:"relayRefusedOther"`  // off, no such target, malformed
	RelayedIn          int64 `json:"relayedIn"`          // relayed connections accepted by us as the target
	RelayedInBad       int64 `json:"relayedInBad"`       // ... that failed TLS or proved another key
	RelayedInRefused   int64 `json:"relayedInRefused"`   // relayed connections to us refused at the pending-inbound cap
	RelayedOut         int64 `json:"relayedOut"`         // relayed connections we dialed
	RelayedOutFailed   int64 `json:"relayedOutFailed"`   // ... that failed
}

type relayState struct {
	e   *MultiEndpoint
	cfg RelayConfig
	lim *rate.Limiter

	mu     sync.Mutex
	active int
	per    map[string]int
	links  map[*relayLink]struct{}

	served, bytes, slowed, busy, notWriter, other atomic.Int64
	in, inBad, inRefused, out, outFailed          atomic.Int64
}

type relayLink struct{ a, b Stream }

func newRelayState(e *MultiEndpoint, cfg RelayConfig) *relayState {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultRelayMaxConns
	}
	if cfg.MaxConnsPerPeer <= 0 {
		cfg.MaxConnsPerPeer = DefaultRelayMaxConnsPerPeer
	}
	if cfg.Rate == 0 {
		cfg.Rate = DefaultRelayRate
	}
	r := &relayState{e: e, cfg: cfg, per: map[string]int{}, links: map[*relayLink]struct{}{}}
	if cfg.Rate > 0 {
		r.lim = rate.NewLimiter(rate.Limit(cfg.Rate), relayChunk)
	}
	return r
}

// relayChunk is the most one copy moves at once (and the limiter's burst).
const relayChunk = 64 << 10

// relayCopyBuffered bounds the bytes a relay holds per direction of a
// relayed connection between reading one leg and writing the other (two
// slices of at most this size: 512 KiB per link at most, flat).
const relayCopyBuffered = 128 << 10

func (r *relayState) stats() RelayStats {
	r.mu.Lock()
	active := int64(r.active)
	r.mu.Unlock()
	return RelayStats{
		RelayActive: active, RelayServed: r.served.Load(), RelayBytes: r.bytes.Load(), RelaySlowed: r.slowed.Load(),
		RelayRefusedBusy: r.busy.Load(), RelayRefusedWriter: r.notWriter.Load(), RelayRefusedOther: r.other.Load(),
		RelayedIn: r.in.Load(), RelayedInBad: r.inBad.Load(), RelayedInRefused: r.inRefused.Load(),
		RelayedOut: r.out.Load(), RelayedOutFailed: r.outFailed.Load(),
	}
}

func (r *relayState) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for l := range r.links {
		l.a.Abort()
		l.b.Abort()
	}
}

// SetRelay sets who may use this node as a relay and how it finds their
// targets (see RelayConfig.IsWriter and Conn). Call before peers connect.
func (e *MultiEndpoint) SetRelay(isWriter func(string) bool, conn func(string) (Conn, bool)) {
	e.relay.mu.Lock()
	e.relay.cfg.IsWriter, e.relay.cfg.Conn = isWriter, conn
	e.relay.mu.Unlock()
}

// relayHeaderTimeout bounds the wait for a request, a notice or a status.
const relayHeaderTimeout = 10 * time.Second

// ServeRelayStream handles a stream of kind StreamRelay (the kind byte
// already read) that peer c opened: a request to relay, or, from a
// relay, a relayed connection for us.
func (e *MultiEndpoint) ServeRelayStream(c Conn, s Stream) {
	var hdr [1 + 32]byte
	_ = s.SetReadDeadline(time.Now().Add(relayHeaderTimeout))
	if _, err := io.ReadFull(s, hdr[:]); err != nil {
		s.Abort()
		return
	}
	_ = s.SetReadDeadline(time.Time{})
	id := hex.EncodeToString(hdr[1:])
	switch hdr[0] {
	case 'C':
		e.relay.serve(c, s, id)
	case 'I':
		e.relayedIn(c, s, id)
	default:
		_, _ = s.Write([]byte{RelayBad})
		s.Abort()
	}
}

// serve relays requester's stream s to target.
func (r *relayState) serve(req Conn, s Stream, target string) {
	refuse := func(code byte, n *atomic.Int64) {
		n.Add(1)
		_ = s.SetWriteDeadline(time.Now().Add(relayHeaderTimeout))
		_, _ = s.Write([]byte{code})
		_ = s.Close()
	}
	r.mu.Lock()
	cfg := r.cfg
	r.mu.Unlock()
	from := req.PeerID()
	switch {
	case cfg.Off || cfg.Conn == nil:
		refuse(RelayOff, &r.other)
		return
	case cfg.IsWriter == nil || !cfg.IsWriter(from):
		r.e.log.Warn("relay refused: requester is not a writer", "peer", from)
		refuse(RelayNotWriter, &r.notWriter)
		return
	case target == from || target == r.e.ID():
		refuse(RelayBad, &r.other)
		return
	}
	// No chains: a relay only joins peers it reaches itself, the
	// requester as well as the target, so each relayed pair costs one hop
	// and one relay's budget.
	if p, _ := PathOf(req); p == PathRelayed {
		refuse(RelayBad, &r.other)
		return
	}
	tc, ok := cfg.Conn(target)
	if p, _ := PathOf(tc); ok && p == PathRelayed {
		ok = false
	}
	if !ok {
		refuse(RelayNoTarget, &r.other)
		return
	}
	r.mu.Lock()
	if r.active >= cfg.MaxConns || r.per[from] >= cfg.MaxConnsPerPeer {
		r.mu.Unlock()
		refuse(RelayBusy, &r.busy)
		return
	}
	r.active++
	r.per[from]++
	r.mu.Unlock()
	release := func() {
		r.mu.Lock()
		r.active--
		if r.per[from]--; r.per[from] <= 0 {
			delete(r.per, from)
		}
		r.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(r.e.ctx, relayHeaderTimeout)
	ts, err := tc.OpenStream(ctx)
	cancel()
	if err != nil {
		release()
		refuse(RelayNoTarget, &r.other)
		return
	}
	fromKey, _ := hex.DecodeString(from)
	_ = ts.SetDeadline(time.Now().Add(relayHeaderTimeout))
	var st [1]byte
	_, err = ts.Write(append([]byte{StreamRelay, 'I'}, fromKey...))
	if err == nil {
		_, err = io.ReadFull(ts, st[:])
	}
	if err != nil || st[0] != RelayOK {
		ts.Abort()
		release()
		refuse(RelayRefused, &r.other)
		return
	}
	_ = ts.SetDeadline(time.Time{})
	_ = s.SetWriteDeadline(time.Now().Add(relayHeaderTimeout))
	if _, err := s.Write([]byte{RelayOK}); err != nil {
		ts.Abort()
		s.Abort()
		release()
		return
	}
	_ = s.SetWriteDeadline(time.Time{})
	r.served.Add(1)
	l := &relayLink{a: s, b: ts}
	r.mu.Lock()
	r.links[l] = struct{}{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.copy(ts, s, cfg.TamperAfter) }()
	go func() { defer wg.Done(); r.copy(s, ts, cfg.TamperAfter) }()
	wg.Wait()
	_ = s.Close()
	_ = ts.Close()
	r.mu.Lock()
	delete(r.links, l)
	r.mu.Unlock()
	release()
}

// copy moves bytes from src to dst within the byte rate; src's end of
// data ends dst's direction, an error tears both down.
//
// dst's writes go through a batchConn (relaybatch.go): a QUIC stream's
// Write returns only once the connection loop has packed the bytes, and
// a copy that waited for it would not read src meanwhile; with the
// buffer, reading from one leg and packing onto the other overlap. The
// buffer holds at most relayCopyBuffered bytes per direction.
//
// A leg that takes nothing for Config.WriteTimeout while bytes wait for
// it fails the copy: its end stopped reading, and a copy waiting for
// room would read nothing from src either, so it would never learn that
// the other end went away and would hold the link and its budget for as
// long as the silent end's connection lives. An honest end's multiplexer
// reads all the time, and its keep-alive, queued behind those bytes,
// fails within the same bound anyway.
func (r *relayState) copy(dst, src Stream, tamperAfter int64) {
	var copied int64
	out := newBatchConnMax(&streamNetConn{Stream: dst}, relayCopyBuffered)
	defer out.stop()
	buf := make([]byte, relayChunk)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if r.lim != nil {
				res := r.lim.ReserveN(time.Now(), n)
				if d := res.Delay(); d > 0 {
					r.slowed.Add(1)
					if !Wait(r.e.ctx, d) {
						dst.Abort()
						src.Abort()
						return
					}
				}
			}
			if tamperAfter > 0 && copied+int64(n) > tamperAfter {
				buf[n-1] ^= 0x55 // a fault test's hostile relay
			}
			copied += int64(n)
			_ = dst.SetWriteDeadline(time.Now().Add(r.e.cfg.WriteTimeout))
			if _, werr := out.Write(buf[:n]); werr != nil {
				dst.Abort()
				src.Abort()
				return
			}
			r.bytes.Add(int64(n))
		}
		if err == io.EOF {
			if out.drain() != nil {
				dst.Abort()
				src.Abort()
				return
			}
			_ = dst.CloseWrite()
			return
		}
		if err != nil {
			dst.Abort()
			src.Abort()
			return
		}
	}
}

// relayedIn accepts a relayed connection from peer `from` that relay c
// announced on stream s.
func (e *MultiEndpoint) relayedIn(c Conn, s Stream, from string) {
	if from == e.ID() {
		_, _ = s.Write([]byte{RelayRefused})
		s.Abort()
		return
	}
	slot := e.takeSlot()
	if slot == nil {
		e.relay.inRefused.Add(1)
		_, _ = s.Write([]byte{RelayRefused})
		s.Abort()
		return
	}
	_ = s.SetWriteDeadline(time.Now().Add(relayHeaderTimeout))
	if _, err := s.Write([]byte{RelayOK}); err != nil {
		slot.release()
		s.Abort()
		return
	}
	_ = s.SetWriteDeadline(time.Time{})
	raw := newBatchConn(&streamNetConn{Stream: s, local: relayAddr{via: c.PeerID(), peer: e.ID()}, remote: relayAddr{via: c.PeerID(), peer: from}})
	e.inboundStream(raw, slot, PathRelayed, c.PeerID(), from, &e.relay.inBad, &e.relay.in)
}

// DialRelay connects to peer target through via, an established
// connection to a relay.
func (e *MultiEndpoint) DialRelay(ctx context.Context, via Conn, target string) (Conn, error) {
	c, err := e.dialRelay(ctx, via, target)
	if err != nil {
		e.relay.outFailed.Add(1)
		return nil, err
	}
	e.relay.out.Add(1)
	return c, nil
}

func (e *MultiEndpoint) dialRelay(ctx context.Context, via Conn, target string) (Conn, error) {
	key, err := hex.DecodeString(target)
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("relay: target %q is not a peer id", target)
	}
	if target == e.ID() {
		return nil, ErrSelf
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.HandshakeTimeout)
	defer cancel()
	s, err := via.OpenStream(ctx)
	if err != nil {
		return nil, fmt.Errorf("relay %.16s: %w", via.PeerID(), err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	if _, err := s.Write(append([]byte{StreamRelay, 'C'}, key...)); err != nil {
		s.Abort()
		return nil, fmt.Errorf("relay %.16s: %w", via.PeerID(), err)
	}
	var st [1]byte
	if _, err := io.ReadFull(s, st[:]); err != nil {
		s.Abort()
		return nil, fmt.Errorf("relay %.16s: no answer: %w", via.PeerID(), err)
	}
	if st[0] != RelayOK {
		s.Abort()
		return nil, fmt.Errorf("relay %.16s: %w", via.PeerID(), &RelayError{Code: st[0]})
	}
	_ = s.SetDeadline(time.Time{})
	raw := newBatchConn(&streamNetConn{Stream: s, local: relayAddr{via: via.PeerID(), peer: e.ID()}, remote: relayAddr{via: via.PeerID(), peer: target}})
	c, err := newStreamConn(ctx, raw, true, e.cert, e.ID(), target, &e.cfg, PathRelayed, via.PeerID())
	if err != nil {
		return nil, fmt.Errorf("relayed through %.16s: %w", via.PeerID(), err)
	}
	e.track(c)
	return c, nil
}

// relayAddr is the address of a relayed connection's end: the peer,
// through the relay.
type relayAddr struct{ via, peer string }

func (a relayAddr) Network() string { return "relay" }
func (a relayAddr) String() string {
	return fmt.Sprintf("relay:%.16s/%.16s", a.via, a.peer)
}

// streamNetConn is a Stream as a net.Conn, for TLS over a relayed stream.
type streamNetConn struct {
	Stream
	local, remote net.Addr
}

func (c *streamNetConn) LocalAddr() net.Addr  { return c.local }
func (c *streamNetConn) RemoteAddr() net.Addr { return c.remote }

// Close tears the relayed stream down both ways (the relay passes it on).
func (c *streamNetConn) Close() error {
	c.Stream.Abort()
	return nil
}

// IsRelayRefusal reports whether err is a relay's refusal with code.
func IsRelayRefusal(err error, code byte) bool {
	var re *RelayError
	return errors.As(err, &re) && re.Code == code
}
