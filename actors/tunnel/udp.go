package tunnel

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"peerdns/transport"
)

// UDP tunnels: flows registered over a stream handshake, then datagrams
// of [8-byte flow id][payload] both ways (see the package doc). This file
// holds the flow table both sides share and the server side of a flow;
// udpclient.go holds the client side.

// flowIDLen is the size of the flow id that prefixes every datagram.
const flowIDLen = 8

// maxUDPRead is the longest datagram a flow's UDP sockets carry. Anything
// this long is over every QUIC datagram limit (about 1,200-1,450 bytes)
// and so dropped anyway; reading more would only cost memory per flow.
// Sockets are read into maxUDPRead+1 bytes (udpReadBuf) so that a longer
// datagram, which the kernel cuts to the buffer without an error, shows
// as longer and is dropped (tooLong) instead of passed on cut: a client
// on the node of its server has no QUIC limit to drop it.
const maxUDPRead = 2048

// udpReadBuf is the read buffer size of a flow's socket (see maxUDPRead).
const udpReadBuf = maxUDPRead + 1

// tooLong reports whether a datagram read into a udpReadBuf buffer was
// cut by the kernel, and counts it as dropped if so. One compare per
// datagram.
func (t *flowTable) tooLong(n int) bool {
	if n <= maxUDPRead {
		return false
	}
	t.dropped.Add(1)
	return true
}

// maxPendingPerFlow bounds the datagrams a client flow keeps while its
// handshake runs; later ones are dropped (UDP may lose them anyway).
const maxPendingPerFlow = 16

// Refusal reasons of a flow handshake (TunnelOpenReply.Err).
var (
	errFlowCap   = errors.New("too many flows")
	errFlowInUse = errors.New("flow id in use")
)

// flowKey names a flow: the peer whose datagrams carry it and its id.
// Keying by peer means a peer can only ever reach flows of its own.
type flowKey struct {
	peer string
	id   uint64
}

// flowSink gets the payloads the peer sends on one flow. deliver runs on
// the connection's datagram loop: it must not block.
type flowSink interface{ deliver(b []byte) }

// flowTable maps the flows of this node, server and client side, to
// their sinks. Safe for concurrent use; the datagram path takes only the
// read lock.
type flowTable struct {
	max     int           // server-side flows per peer (and client flows per client)
	idle    time.Duration // a flow with no datagram either way for this long ends
	dropped *atomic.Int64 // Counters.DroppedDatagrams

	mu      sync.RWMutex // guards the maps below
	m       map[flowKey]flowSink
	perPeer map[string]int // server-side flows per peer
}

func newFlowTable(max int, idle time.Duration, dropped *atomic.Int64) *flowTable {
	return &flowTable{max: max, idle: idle, dropped: dropped, m: map[flowKey]flowSink{}, perPeer: map[string]int{}}
}

func (t *flowTable) get(k flowKey) flowSink {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[k]
}

// addServer registers a flow a peer asked for: errFlowCap when the peer
// has max flows already, errFlowInUse for an id it uses.
func (t *flowTable) addServer(k flowKey, f flowSink) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m[k]; ok {
		return errFlowInUse
	}
	if t.perPeer[k.peer] >= t.max {
		return errFlowCap
	}
	t.m[k] = f
	t.perPeer[k.peer]++
	return nil
}

// addClient registers a flow we open to k.peer; false when the id is in
// use (pick another).
func (t *flowTable) addClient(k flowKey, f flowSink) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m[k]; ok {
		return false
	}
	t.m[k] = f
	return true
}

// remove forgets k if f is still its sink.
func (t *flowTable) remove(k flowKey, f flowSink, server bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[k] != f {
		return
	}
	delete(t.m, k)
	if server {
		if t.perPeer[k.peer]--; t.perPeer[k.peer] <= 0 {
			delete(t.perPeer, k.peer)
		}
	}
}

// send sends one datagram (pkt = flow id + payload) and counts its
// payload in st.out. A datagram over the connection's limit is dropped
// and counted (Counters.DroppedDatagrams, the tunnel's lastError); false
// means the connection is gone and the flow should end.
func (t *flowTable) send(c transport.Conn, pkt []byte, st *stats) bool {
	err := c.SendDatagram(pkt)
	switch {
	case err == nil:
		st.out.Add(int64(len(pkt) - flowIDLen))
		return true
	case errors.Is(err, transport.ErrDatagramTooLarge):
		t.dropped.Add(1)
		st.fail("udp datagram dropped: " + err.Error())
		return true
	}
	return false
}

// lost counts a datagram a socket write refused (a host firewall's
// output drop, no buffers, no route for a moment) as dropped: UDP lost
// it, the flow goes on. Other write errors (a closed socket) end the
// flow through its reader.
func (t *flowTable) lost(err error) {
	if transport.IsTransientSendErr(err) {
		t.dropped.Add(1)
	}
}

// datagram is the Mesh datagram handler: it hands the payload to the
// flow the datagram names. A datagram of an unknown flow (expired,
// forgotten by a server that restarted, never registered) is answered
// with an unknown-flow datagram (flow id 0, never a flow's, then the
// unknown id), to that peer only and never longer than twice what it
// sent; nothing is logged: UDP may lose them anyway, and a log line
// per datagram would be a flood. A datagram shorter than a flow id is
// dropped.
func (a *acceptor) datagram(c transport.Conn, b []byte) {
	if len(b) < flowIDLen {
		return
	}
	id := binary.BigEndian.Uint64(b)
	if id == 0 {
		if len(b) == 2*flowIDLen {
			a.reg.flows.unknown(flowKey{c.PeerID(), binary.BigEndian.Uint64(b[flowIDLen:])})
		}
		return
	}
	if f := a.reg.flows.get(flowKey{c.PeerID(), id}); f != nil {
		f.deliver(b[flowIDLen:])
		return
	}
	var m [2 * flowIDLen]byte
	binary.BigEndian.PutUint64(m[flowIDLen:], id)
	_ = c.SendDatagram(m[:])
}

// unknown handles an unknown-flow datagram of k.peer about k.id: the
// client flow it names ends (its server forgot it: it restarted), and
// the socket's next datagram registers a new one; else a program that
// sends more often than the idle timeout would have its datagrams
// dropped for good. A server flow of that id is not the peer's to end.
func (t *flowTable) unknown(k flowKey) {
	if f, ok := t.get(k).(*clientFlow); ok {
		f.forgotten()
	}
}

// serverFlow is one flow of a UDP server: a connected UDP socket to the
// target, replies sent back to the peer with the flow's id.
type serverFlow struct {
	h    *serverHandle
	tab  *flowTable
	conn transport.Conn
	key  flowKey
	u    *net.UDPConn
	last atomic.Int64 // unix ns of the last datagram either way
	done chan struct{}
	once sync.Once
}

func (f *serverFlow) touch() { f.last.Store(time.Now().UnixNano()) }

func (f *serverFlow) deliver(b []byte) {
	f.touch()
	if n, err := f.u.Write(b); err == nil {
		f.h.stats.in.Add(int64(n))
	} else {
		f.tab.lost(err)
	}
}

// close ends the flow; its reader returns.
func (f *serverFlow) close() {
	f.once.Do(func() {
		close(f.done)
		_ = f.u.Close()
	})
}

// run sends the target's replies to the peer until the flow was idle
// for tab.idle, the connection closed or the flow was closed.
func (f *serverFlow) run() {
	buf := make([]byte, flowIDLen+udpReadBuf)
	binary.BigEndian.PutUint64(buf, f.key.id)
	for {
		_ = f.u.SetReadDeadline(time.Unix(0, f.last.Load()).Add(f.tab.idle))
		n, err := f.u.Read(buf[flowIDLen:])
		if err != nil {
			select {
			case <-f.done:
				return
			default:
			}
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				if time.Since(time.Unix(0, f.last.Load())) >= f.tab.idle {
					return // idle: expired
				}
				continue // a datagram from the peer moved the deadline
			case transport.IsTransientSendErr(err):
				// An ICMP port or host unreachable from the target, a
				// refused send: one datagram lost, UDP goes on.
				continue
			}
			return
		}
		f.touch()
		if f.tab.tooLong(n) {
			f.h.stats.fail("udp datagram from " + f.h.target + " dropped: longer than 2048 bytes")
			continue
		}
		if !f.tab.send(f.conn, buf[:flowIDLen+n], f.h.stats) {
			return
		}
	}
}

// serveFlow runs the server side of a UDP flow handshake on s (open was
// read and its proof checked) and then carries the flow until it ends.
// It owns s and closes it once the handshake is answered: the flow lives
// on in datagrams, so it never holds a stream.
func (a *acceptor) serveFlow(c transport.Conn, s transport.Stream, h *serverHandle, id uint64, proven bool) {
	peer := c.PeerID()
	d := net.Dialer{Timeout: h.dial}
	nc, err := d.DialContext(a.ctx, "udp", h.target)
	if err != nil {
		h.stats.fail("dial " + h.target + ": " + err.Error())
		a.refuse(s, "target unreachable", h.id, "udp tunnel target unreachable", "target", h.target, "err", err)
		return
	}
	f := &serverFlow{h: h, tab: a.reg.flows, conn: c, key: flowKey{peer, id}, u: nc.(*net.UDPConn), done: make(chan struct{})}
	f.touch()
	if err := a.reg.flows.addServer(f.key, f); err != nil {
		_ = f.u.Close()
		if errors.Is(err, errFlowCap) {
			h.stats.fail("refused a udp flow from " + short(peer) + ": too many flows from that peer")
		}
		a.refuse(s, err.Error(), h.id, "refused udp flow: "+err.Error(), "peer", peer, "cap", a.reg.flows.max)
		return
	}
	defer a.reg.flows.remove(f.key, f, true)
	remove, ok := h.conns.add(f.close)
	if !ok { // the server stopped meanwhile
		f.close()
		a.refuse(s, "unknown tunnel", "", "refused udp flow: server stopped", "peer", peer)
		return
	}
	defer remove()
	defer f.close()
	if err := h.accept(c, s, proven); err != nil {
		streamAbort(s)
		return
	}
	streamClose(s)
	h.stats.open.Add(1)
	h.stats.total.Add(1)
	defer h.stats.open.Add(-1)
	// The flow ends with its connection or the tunnels supervisor.
	stop := context.AfterFunc(a.ctx, f.close)
	defer stop()
	go func() {
		select {
		case <-c.Done():
			f.close()
		case <-f.done:
		}
	}()
	f.run()
}
