package tunnel

import (
	"context"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"peerdns/messages"
	"peerdns/transport"
)

// serverHandle is what the data path needs of one running server
// incarnation. Immutable except for its stats and conns; the server
// actor closes it (conns.closeAll) when it stops or restarts.
type serverHandle struct {
	id     string // server id
	key    serverKey
	target string // host:port the server dials
	udp    bool   // a UDP server: streams register flows (udp.go)
	stats  *stats
	conns  *connSet
	ev     *events
	dial   time.Duration // target dial timeout

	streams    atomic.Int64 // TCP connections carried now (streams and local clients)
	maxStreams int64        // cap of streams (Deps.MaxStreamsPerTunnel)
}

// acquire takes one of the tunnel's connection places; false at the cap.
func (h *serverHandle) acquire() bool {
	if h.streams.Add(1) > h.maxStreams {
		h.streams.Add(-1)
		return false
	}
	return true
}

func (h *serverHandle) release() { h.streams.Add(-1) }

// dialTarget connects to the server's target.
func (h *serverHandle) dialTarget(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: h.dial}
	return d.DialContext(ctx, "tcp", h.target)
}

// registry is the dispatch table of inbound streams: announced id →
// running server. The supervisor replaces the map (copy-on-write) from
// its Receive; stream goroutines Load it once per stream.
type registry struct {
	handles atomic.Pointer[map[string]*serverHandle]

	mu      sync.Mutex // guards perPeer
	perPeer map[string]int
	maxPeer int

	refused *atomic.Int64 // streams refused (Counters.RefusedStreams)
	flows   *flowTable    // UDP flows, both sides (set by the supervisor)
}

func newRegistry(maxPerPeer int, refused *atomic.Int64) *registry {
	r := &registry{perPeer: map[string]int{}, maxPeer: maxPerPeer, refused: refused}
	r.handles.Store(&map[string]*serverHandle{})
	return r
}

func (r *registry) lookup(id string) *serverHandle { return (*r.handles.Load())[id] }

// local is the server on this node that k reaches, or nil: the server
// of k.Plain when it is not secure (k is its public key), the secure
// server of k.Secure (k is its secret). A secure server's plain id is
// its announced id, which every peer sees: it reaches the server on
// this node no more than through a peer, where the proof is asked.
func (r *registry) local(k clientKey) *serverHandle {
	if h := r.lookup(k.Plain); h != nil && h.key.Secret == nil {
		return h
	}
	if h := r.lookup(k.Secure); h != nil && h.key.Secret != nil {
		return h
	}
	return nil
}

// put and drop are called by the supervisor only (single writer).
func (r *registry) put(h *serverHandle) {
	old := *r.handles.Load()
	next := make(map[string]*serverHandle, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[h.key.Announced] = h
	r.handles.Store(&next)
}

// drop removes h if it is still the handle of its id, and reports
// whether it did.
func (r *registry) drop(h *serverHandle) bool {
	old := *r.handles.Load()
	if old[h.key.Announced] != h {
		return false
	}
	next := make(map[string]*serverHandle, len(old))
	for k, v := range old {
		if v != h {
			next[k] = v
		}
	}
	r.handles.Store(&next)
	return true
}

// ids are the announced ids of the running servers, sorted.
func (r *registry) ids() []string {
	m := *r.handles.Load()
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// acquire takes one of peer's stream places; false at the cap.
func (r *registry) acquire(peer string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.perPeer[peer] >= r.maxPeer {
		return false
	}
	r.perPeer[peer]++
	return true
}

func (r *registry) release(peer string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.perPeer[peer]--; r.perPeer[peer] <= 0 {
		delete(r.perPeer, peer)
	}
}

// acceptor serves the streams peers open: the function the supervisor
// hands to Mesh.HandleStreams. It never touches an actor.
type acceptor struct {
	reg       *registry
	ev        *events
	handshake time.Duration
	ctx       context.Context // ends when the supervisor stops: late streams are refused
}

// serve runs the server side of the handshake on s and then the tunnel.
// It owns s.
func (a *acceptor) serve(c transport.Conn, s transport.Stream) {
	if a.ctx.Err() != nil {
		streamAbort(s)
		return
	}
	peer := c.PeerID()
	// A peer that opens a stream and says nothing holds it only this long.
	_ = s.SetDeadline(time.Now().Add(a.handshake))
	open, err := readOpen(s)
	if err != nil {
		a.refuse(s, "", "", "refused tunnel stream: bad handshake", "peer", peer, "err", err)
		return
	}
	h := a.reg.lookup(open.ID)
	if h == nil {
		a.refuse(s, "unknown tunnel", "", "refused tunnel stream: unknown id", "peer", peer, "id", open.ID)
		return
	}
	if h.key.Secret != nil && !checkProof(c, open.ID, h.key.Secret, open.Proof) {
		h.stats.fail("refused a stream from " + short(peer) + ": missing or wrong proof")
		a.refuse(s, "proof refused", h.id, "refused tunnel stream: missing or wrong proof of the secret", "peer", peer)
		return
	}
	if h.udp != (open.Flow != 0) {
		a.refuse(s, "wrong protocol", h.id, "refused tunnel stream: tcp/udp mismatch", "peer", peer, "udpServer", h.udp)
		return
	}
	if h.udp {
		a.serveFlow(c, s, h, open.Flow, open.Proven)
		return
	}
	if !a.reg.acquire(peer) {
		h.stats.fail("refused a stream from " + short(peer) + ": too many streams from that peer")
		a.refuse(s, "too many streams", h.id, "refused tunnel stream: peer is at its stream cap", "peer", peer, "cap", a.reg.maxPeer)
		return
	}
	defer a.reg.release(peer)
	if !h.acquire() {
		h.stats.fail("refused a stream from " + short(peer) + ": too many streams on this tunnel")
		a.refuse(s, "too many streams", h.id, "refused tunnel stream: tunnel is at its stream cap", "peer", peer, "cap", h.maxStreams)
		return
	}
	defer h.release()
	h.carry(a.ctx, c, s, open.Proven)
}

// refuse answers reason (when not "") and ends s, or tears s down
// without an answer; the refusal is logged (rate-limited) and counted.
// An answer is followed by Close (FIN, stop reading), not Abort: a QUIC
// reset would discard the answer before the client read it.
//
// Counted and logged first: closing the stream can take a while, and
// whoever reads the refusal should find it in the log already.
func (a *acceptor) refuse(s transport.Stream, reason, id, msg string, attrs ...any) {
	a.reg.refused.Add(1)
	a.ev.dataPath(slog.LevelWarn, id, msg, attrs...)
	if reason != "" {
		_ = writeFrame(s, &messages.TunnelOpenReply{Err: reason})
		streamClose(s)
	} else {
		streamAbort(s)
	}
}

// carry dials the target for an authorised stream, answers the
// handshake and copies until both sides end.
func (h *serverHandle) carry(ctx context.Context, c transport.Conn, s transport.Stream, proven bool) {
	tc, err := h.dialTarget(ctx)
	if err != nil {
		h.stats.fail("dial " + h.target + ": " + err.Error())
		h.ev.dataPath(slog.LevelWarn, h.id, "tunnel target unreachable", "target", h.target, "err", err)
		_ = writeFrame(s, &messages.TunnelOpenReply{Err: "target unreachable"})
		streamClose(s) // not Abort: a reset would discard the answer
		return
	}
	local, remote := tcpSide{tc}, streamSide{s, c.Done()}
	remove, ok := h.conns.add(func() { local.abort(); remote.abort() })
	if !ok { // the server stopped meanwhile
		tcpAbort(tc)
		_ = writeFrame(s, &messages.TunnelOpenReply{Err: "unknown tunnel"})
		streamAbort(s)
		return
	}
	defer remove()
	if err := h.accept(c, s, proven); err != nil {
		tcpAbort(tc)
		streamAbort(s)
		return
	}
	_ = s.SetDeadline(time.Time{})
	pipe(local, remote, h.stats)
}

// accept writes the accepting TunnelOpenReply on s, with the proof that
// this server holds the tunnel's key, unless the client says it holds
// one of this connection already (proven).
func (h *serverHandle) accept(c transport.Conn, s transport.Stream, proven bool) error {
	if proven {
		return writeFrame(s, &messages.TunnelOpenReply{})
	}
	p, err := serverProof(c, h.key.Announced, h.key)
	if err != nil {
		return err
	}
	return writeFrame(s, &messages.TunnelOpenReply{Proof: p})
}

// short abbreviates a peer id for messages.
func short(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}
