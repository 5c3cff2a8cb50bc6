package plugin

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"peerdns/messages"
	"peerdns/transport"
)

// Peer calls: peer.call and peer.send from a plugin's handler reach the
// same plugin (the same domain) on another peer. Each is one stream of
// kind transport.StreamPlugin on the existing peer connection: the
// caller writes a messages.PluginCall frame, the receiver hands it to its
// plugin's handler as the node → plugin call "peer.call" (params {peer,
// method, params}; the result is the answer) or the notification
// "peer.send", and for a call writes a messages.PluginCallReply frame.
// Frames are at most MaxPeerFrame bytes (a handler's answer that would
// make a larger one is sent as an error saying so). A call to a peer that is not
// connected, or whose plugin is not loaded, fails with the reason. A
// handler that sends peer.call or peer.send as a notification gets no
// answer; the call waits off its session's read loop, at most
// maxNotifyInflight at once, more being dropped and logged (rpc.go). Both
// directions are counted per plugin (PeerStats) for the stats' pluginRpc
// and peerChannels; an incoming one only for a plugin loaded here.
//
// At most maxPeerCalls plugin streams of one peer are served at once,
// counted from before their request is read; the request of one more is
// read and dropped, and it is answered with an error. Each served may
// hold a request of up to MaxPeerFrame for up to the peer timeout (read,
// then waiting on the handler), so without the bound one peer held up
// to the transport's stream limit of them (1,024 on QUIC: a gigabyte of
// the node's memory).

// MaxPeerFrame bounds one peer call's request or reply.
const MaxPeerFrame = 1 << 20

// maxPeerCalls bounds the plugin streams of one peer served at once: as
// many as one handler of that peer may have waiting (maxInflight
// requests and maxNotifyInflight notifications), so a single busy
// plugin of an honest peer is not refused.
const maxPeerCalls = maxInflight + maxNotifyInflight

// PeerCalls carries the peer calls of this node's plugins.
type PeerCalls struct {
	mesh    transport.Mesh
	table   *Table
	timeout time.Duration

	mu    sync.Mutex // guards stats and calls
	stats map[string]*PeerStat
	calls map[string]int // streams being served, by peer id
}

// PeerStat counts one plugin's peer calls.
type PeerStat struct {
	Domain                  string
	Open                    atomic.Int64
	CallsOut, CallsIn       atomic.Int64
	SendsOut, SendsIn       atomic.Int64
	FailuresOut, FailuresIn atomic.Int64
}

// PeerChannel is one plugin's peer-call counters at a moment (the stats'
// peerChannels entries).
type PeerChannel struct {
	Domain      string `json:"domain"`
	Transport   string `json:"transport"` // "quic-stream": one stream per call
	Open        int64  `json:"open"`
	CallsOut    int64  `json:"callsOut"`
	CallsIn     int64  `json:"callsIn"`
	SendsOut    int64  `json:"sendsOut"`
	SendsIn     int64  `json:"sendsIn"`
	FailuresOut int64  `json:"failuresOut"`
	FailuresIn  int64  `json:"failuresIn"`
}

// NewPeerCalls serves the plugin streams of mesh (a Mux view of kind
// StreamPlugin) for the plugins of table.
func NewPeerCalls(mesh transport.Mesh, table *Table, timeout time.Duration) *PeerCalls {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	p := &PeerCalls{mesh: mesh, table: table, timeout: timeout, stats: map[string]*PeerStat{}, calls: map[string]int{}}
	mesh.HandleStreams(p.serve)
	return p
}

func (p *PeerCalls) stat(domain string) *PeerStat {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats[domain]
	if s == nil {
		s = &PeerStat{Domain: domain}
		p.stats[domain] = s
	}
	return s
}

// Stats lists the counters per plugin domain.
func (p *PeerCalls) Stats() []PeerChannel {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PeerChannel, 0, len(p.stats))
	for _, s := range p.stats {
		out = append(out, PeerChannel{Domain: s.Domain, Transport: "quic-stream", Open: s.Open.Load(),
			CallsOut: s.CallsOut.Load(), CallsIn: s.CallsIn.Load(), SendsOut: s.SendsOut.Load(), SendsIn: s.SendsIn.Load(),
			FailuresOut: s.FailuresOut.Load(), FailuresIn: s.FailuresIn.Load()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Domain < out[j].Domain })
	return out
}

// CallPlugin sends a call (wait) or a send to domain's plugin on peer.
func (p *PeerCalls) CallPlugin(ctx context.Context, peer, domain, method string, params json.RawMessage, wait bool) (json.RawMessage, error) {
	st := p.stat(domain)
	res, err := p.call(ctx, peer, domain, method, params, wait)
	switch {
	case err != nil:
		st.FailuresOut.Add(1)
	case wait:
		st.CallsOut.Add(1)
	default:
		st.SendsOut.Add(1)
	}
	return res, err
}

func (p *PeerCalls) call(ctx context.Context, peer, domain, method string, params json.RawMessage, wait bool) (json.RawMessage, error) {
	conn, ok := p.mesh.Conn(peer)
	if !ok {
		return nil, fmt.Errorf("peer %.16s is not connected", peer)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	s, err := conn.OpenStream(ctx)
	if err != nil {
		return nil, fmt.Errorf("open stream to %.16s: %w", peer, err)
	}
	st := p.stat(domain)
	st.Open.Add(1)
	defer st.Open.Add(-1)
	stop := context.AfterFunc(ctx, func() { s.Abort() })
	defer stop()
	if err := messages.WriteFrame(s, &messages.PluginCall{Domain: domain, Method: method, Params: params, Wait: wait}, MaxPeerFrame); err != nil {
		s.Abort()
		return nil, err
	}
	if err := s.CloseWrite(); err != nil {
		s.Abort()
		return nil, err
	}
	if !wait {
		_ = s.Close()
		return json.RawMessage("{}"), nil
	}
	var rep messages.PluginCallReply
	if err := messages.ReadFrame(s, &rep, MaxPeerFrame); err != nil {
		s.Abort()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("peer %.16s: %w", peer, err)
	}
	_ = s.Close()
	if rep.Err != "" {
		return nil, errors.New(rep.Err)
	}
	return json.RawMessage(rep.Result), nil
}

// enter counts one more stream of peer being served, unless
// maxPeerCalls are.
func (p *PeerCalls) enter(peer string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls[peer] >= maxPeerCalls {
		return false
	}
	p.calls[peer]++
	return true
}

// leave counts a stream of peer served.
func (p *PeerCalls) leave(peer string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls[peer]--; p.calls[peer] <= 0 {
		delete(p.calls, peer)
	}
}

// serve answers one plugin stream a peer opened.
func (p *PeerCalls) serve(c transport.Conn, s transport.Stream) {
	peer := c.PeerID()
	_ = s.SetReadDeadline(time.Now().Add(p.timeout))
	if !p.enter(peer) {
		p.refuse(s)
		return
	}
	defer p.leave(peer)
	var req messages.PluginCall
	if err := messages.ReadFrame(s, &req, MaxPeerFrame); err != nil {
		s.Abort()
		return
	}
	_ = s.SetReadDeadline(time.Time{})
	reply := func(r *messages.PluginCallReply) {
		_ = s.SetWriteDeadline(time.Now().Add(p.timeout))
		if err := messages.WriteFrame(s, r, MaxPeerFrame); err != nil {
			s.Abort()
			return
		}
		_ = s.Close()
	}
	// Counted only for a plugin loaded here: the domain is the peer's
	// word, and a counter for each name a peer sent would be kept (and
	// listed) for good.
	rt := p.table.Lookup(req.Domain)
	if rt == nil {
		if req.Wait {
			reply(&messages.PluginCallReply{Err: "plugin " + req.Domain + " is not loaded on this peer"})
		} else {
			s.Abort()
		}
		return
	}
	st := p.stat(req.Domain)
	st.Open.Add(1)
	defer st.Open.Add(-1)
	if !json.Valid(orEmpty(req.Params)) {
		st.FailuresIn.Add(1)
		if req.Wait {
			reply(&messages.PluginCallReply{Err: "the call's params are not JSON"})
		} else {
			s.Abort()
		}
		return
	}
	params := map[string]any{"peer": peer, "method": req.Method, "params": json.RawMessage(orEmpty(req.Params))}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	if !req.Wait {
		// A send the handler did not take (it does not run, or did not
		// read its input within the timeout) is lost: a failure.
		if err := rt.notify(ctx, "peer.send", params); err != nil {
			st.FailuresIn.Add(1)
		} else {
			st.SendsIn.Add(1)
		}
		_ = s.Close()
		return
	}
	res, err := rt.call(ctx, "peer.call", params)
	var b []byte
	if err == nil {
		// Encoded first: an answer over MaxPeerFrame cannot go as one
		// frame, and the caller is told so rather than left with a reset
		// stream.
		if b, err = messages.Marshal(&messages.PluginCallReply{Result: res}); err == nil && len(b) > MaxPeerFrame {
			err = fmt.Errorf("the plugin's answer is %d bytes, over the %d a peer call carries", len(res), MaxPeerFrame)
		}
	}
	if err != nil {
		st.FailuresIn.Add(1)
		reply(&messages.PluginCallReply{Err: err.Error()})
		return
	}
	st.CallsIn.Add(1)
	_ = s.SetWriteDeadline(time.Now().Add(p.timeout))
	if err := messages.WriteFrameBytes(s, b, MaxPeerFrame); err != nil {
		s.Abort()
		return
	}
	_ = s.Close()
}

// refuse answers a stream past maxPeerCalls of its peer with an error,
// once its request is read and dropped: the caller gets the reason, and
// the request costs a buffer of the copy, not its size.
func (p *PeerCalls) refuse(s transport.Stream) {
	var h [4]byte
	if _, err := io.ReadFull(s, h[:]); err != nil || binary.BigEndian.Uint32(h[:]) > MaxPeerFrame {
		s.Abort()
		return
	}
	if _, err := io.CopyN(io.Discard, s, int64(binary.BigEndian.Uint32(h[:]))); err != nil {
		s.Abort()
		return
	}
	_ = s.SetWriteDeadline(time.Now().Add(p.timeout))
	busy := fmt.Sprintf("the peer serves at most %d plugin calls of one peer at once", maxPeerCalls)
	if err := messages.WriteFrame(s, &messages.PluginCallReply{Err: busy}, MaxPeerFrame); err != nil {
		s.Abort()
		return
	}
	_ = s.Close()
}

func orEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}
