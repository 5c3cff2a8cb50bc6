package tunnel

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"peerdns/transport"
)

// serveUDP is serve for a UDP client: it binds a UDP socket on the
// domain's local IP and port and gives each client socket (source
// address) a flow of its own.
func (r *clientRun) serveUDP() {
	defer r.wg.Done()
	pc := r.bindUDP()
	if pc == nil {
		return
	}
	r.wg.Add(2)
	go r.lookup()
	u := newUDPClient(r, pc)
	go u.janitor()
	buf := make([]byte, udpReadBuf)
	scratch := make([]byte, flowIDLen+udpReadBuf)
	for {
		n, src, err := pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if done, retry := r.socketErr(err); done {
				return
			} else if retry {
				continue
			}
			r.ev.emit(slog.LevelError, r.e.rec.ID, "udp tunnel client socket failed", "err", err)
			u.closeAll()
			_ = pc.Close()
			if pc = r.bindUDP(); pc == nil {
				return
			}
			u = newUDPClient(r, pc)
			r.wg.Add(1)
			go u.janitor()
			r.wake() // the lookup says again whether the server is reachable
			continue
		}
		if u.tab.tooLong(n) {
			u.r.e.stats.fail(fmt.Sprintf("udp datagram from %s dropped: longer than %d bytes", src, maxUDPRead))
			continue
		}
		u.fromLocal(src, buf[:n], scratch)
	}
}

// bindUDP is bind for a UDP socket. The socket is closed by halt (it is
// in r.conns).
func (r *clientRun) bindUDP() *net.UDPConn {
	var pc *net.UDPConn
	ok := r.bindLoop("udp tunnel client", func(addr netip.AddrPort) (bool, error) {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
		if err != nil {
			return false, err
		}
		if _, ok := r.conns.add(func() { _ = c.Close() }); !ok { // halted meanwhile
			_ = c.Close()
			return false, nil
		}
		r.mu.Lock()
		r.addr, r.bound = addr.String(), true
		r.mu.Unlock()
		pc = c
		return true, nil
	})
	if !ok {
		return nil
	}
	return pc
}

// udpClient is the flows of one bound UDP client socket.
type udpClient struct {
	r   *clientRun
	pc  *net.UDPConn
	tab *flowTable

	stop chan struct{} // closed by closeAll: the socket is given up

	mu    sync.Mutex // guards flows
	flows map[netip.AddrPort]*clientFlow

	// After a flow failed to open, new flows wait: a datagram that
	// would open one before retryAt is dropped (counted), so a program
	// that keeps sending to a server nobody can reach costs the
	// providers a handshake per wait, not one per datagram. The wait
	// grows by LookupBackoff with each failure in a row and a flow that
	// opens resets it.
	retryMu sync.Mutex // guards the two below
	backoff transport.Backoff
	retryAt time.Time
}

func newUDPClient(r *clientRun, pc *net.UDPConn) *udpClient {
	return &udpClient{r: r, pc: pc, tab: r.reg.flows, stop: make(chan struct{}), flows: map[netip.AddrPort]*clientFlow{},
		backoff: r.d.LookupBackoff}
}

// waiting reports whether new flows wait after a failed one.
func (u *udpClient) waiting() bool {
	u.retryMu.Lock()
	defer u.retryMu.Unlock()
	return !u.retryAt.IsZero() && time.Now().Before(u.retryAt)
}

// openFailed starts or lengthens the wait; a flow that failed while the
// wait of an earlier failure ran (they opened together) does not.
func (u *udpClient) openFailed() {
	u.retryMu.Lock()
	defer u.retryMu.Unlock()
	if now := time.Now(); !now.Before(u.retryAt) {
		u.retryAt = now.Add(u.backoff.Next())
	}
}

// opened ends the wait.
func (u *udpClient) opened() {
	u.retryMu.Lock()
	defer u.retryMu.Unlock()
	u.backoff.Reset()
	u.retryAt = time.Time{}
}

// fromLocal sends one datagram a local program sent from src: on src's
// flow, opening one first (the datagram waits for the handshake).
// scratch is the reader goroutine's buffer for the datagram it builds.
func (u *udpClient) fromLocal(src netip.AddrPort, b, scratch []byte) {
	u.mu.Lock()
	f := u.flows[src]
	if f == nil {
		if u.waiting() {
			u.mu.Unlock()
			u.tab.dropped.Add(1)
			return
		}
		if len(u.flows) >= u.tab.max {
			u.mu.Unlock()
			u.tab.dropped.Add(1)
			u.r.e.stats.fail(fmt.Sprintf("udp datagram from %s dropped: the client has %d flows", src, u.tab.max))
			return
		}
		f = &clientFlow{u: u, src: src, pending: [][]byte{append([]byte(nil), b...)}, done: make(chan struct{})}
		f.touch()
		u.flows[src] = f
		u.mu.Unlock()
		u.r.wg.Add(1)
		go f.open()
		return
	}
	u.mu.Unlock()
	f.send(b, scratch)
}

// janitor ends flows idle for tab.idle (no datagram either way) and
// flows whose peer connection closed, until the incarnation ends.
func (u *udpClient) janitor() {
	defer u.r.wg.Done()
	t := time.NewTicker(max(u.tab.idle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-u.r.ctx.Done():
			return
		case <-u.stop:
			return
		case <-t.C:
		}
		var stale []*clientFlow
		u.mu.Lock()
		for _, f := range u.flows {
			if f.expired() {
				stale = append(stale, f)
			}
		}
		u.mu.Unlock()
		for _, f := range stale {
			f.close()
		}
	}
}

func (u *udpClient) closeAll() {
	close(u.stop)
	u.mu.Lock()
	fs := make([]*clientFlow, 0, len(u.flows))
	for _, f := range u.flows {
		fs = append(fs, f)
	}
	u.mu.Unlock()
	for _, f := range fs {
		f.close()
	}
}

// clientFlow is the flow of one client socket: to a peer's server over
// datagrams, or to a server on this node over a connected UDP socket.
type clientFlow struct {
	u    *udpClient
	src  netip.AddrPort
	last atomic.Int64 // unix ns of the last datagram either way
	done chan struct{}
	once sync.Once

	mu      sync.Mutex // guards the fields below
	ready   bool       // the handshake was accepted: send directly
	pending [][]byte   // datagrams waiting for the handshake
	conn    transport.Conn
	key     flowKey
	local   *net.UDPConn  // a server on this node: its target
	h       *serverHandle // that server (its counters)
	release func()        // frees what open took
}

func (f *clientFlow) touch() { f.last.Store(time.Now().UnixNano()) }

func (f *clientFlow) expired() bool {
	f.mu.Lock()
	ready, conn := f.ready, f.conn
	f.mu.Unlock()
	if !ready {
		return false // the handshake bounds itself
	}
	if conn != nil && conn.Err() != nil {
		return true
	}
	return time.Since(time.Unix(0, f.last.Load())) >= f.u.tab.idle
}

// send carries one datagram to the server (queued while the handshake
// runs). A connection that is gone ends the flow: the next datagram from
// the socket opens a new one.
func (f *clientFlow) send(b, scratch []byte) {
	f.mu.Lock()
	if !f.ready {
		if len(f.pending) < maxPendingPerFlow {
			f.pending = append(f.pending, append([]byte(nil), b...))
		} else {
			f.u.tab.dropped.Add(1)
		}
		f.mu.Unlock()
		return
	}
	conn, key, local, h := f.conn, f.key, f.local, f.h
	f.mu.Unlock()
	f.touch()
	st := f.u.r.e.stats
	if local != nil {
		if n, err := local.Write(b); err == nil {
			st.out.Add(int64(n))
			h.stats.in.Add(int64(n))
		} else {
			f.u.tab.lost(err)
		}
		return
	}
	pkt := scratch[:flowIDLen+len(b)]
	binary.BigEndian.PutUint64(pkt, key.id)
	copy(pkt[flowIDLen:], b)
	if !f.u.tab.send(conn, pkt, st) {
		f.close()
	}
}

// deliver writes a reply from the peer's server to the client socket.
// Nothing is written before the handshake was accepted (ready): the peer
// learnt the flow id from the open, but has not yet proved it holds the
// tunnel's key (an impostor among the providers), and the server sends
// nothing before the client's first datagram, which waits for ready.
func (f *clientFlow) deliver(b []byte) {
	if !f.isReady() {
		return
	}
	f.touch()
	if n, err := f.u.pc.WriteToUDPAddrPort(b, f.src); err == nil {
		f.u.r.e.stats.in.Add(int64(n))
	} else {
		f.u.tab.lost(err)
	}
}

// forgotten ends the flow when its server says it does not know it
// (flowTable.unknown); a flow whose handshake runs is not the server's yet.
func (f *clientFlow) forgotten() {
	if f.isReady() {
		f.close()
	}
}

// isReady reports whether the flow's handshake was accepted.
func (f *clientFlow) isReady() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready
}

// close ends the flow and forgets it; idempotent. What the flow holds
// is freed here once it is ready; before that open frees it when it
// sees the flow closed (it may still be taking things).
func (f *clientFlow) close() {
	f.once.Do(func() {
		close(f.done)
		f.u.mu.Lock()
		if f.u.flows[f.src] == f {
			delete(f.u.flows, f.src)
		}
		f.u.mu.Unlock()
		f.mu.Lock()
		ready := f.ready
		f.ready, f.pending = false, nil
		f.mu.Unlock()
		if ready {
			f.free()
			f.u.r.e.stats.open.Add(-1)
		}
	})
}

// free lets go of the flow's registration, socket and places; called
// once, by close or open.
func (f *clientFlow) free() {
	f.mu.Lock()
	conn, key, local, release := f.conn, f.key, f.local, f.release
	f.mu.Unlock()
	if conn != nil {
		f.u.tab.remove(key, f, false)
	}
	if local != nil {
		_ = local.Close()
	}
	if release != nil {
		release()
	}
}

// open finds the server (as route does for TCP), registers the flow
// and sends what waited for it. A flow that finds no server is dropped
// with its datagrams; the next datagram from the socket after the
// client's wait (udpClient.retryAt) tries again.
func (f *clientFlow) open() {
	r := f.u.r
	defer r.wg.Done()
	removeConn, ok := r.conns.add(f.close)
	if !ok {
		f.close()
		return
	}
	f.mu.Lock()
	f.release = removeConn
	f.mu.Unlock()
	if err := f.route(); err != nil {
		f.u.openFailed()
		r.e.stats.fail(err.Error())
		r.ev.dataPath(slog.LevelWarn, r.e.rec.ID, "udp flow refused", "src", f.src.String(), "err", err)
		f.close()
		f.free()
		r.wake()
		return
	}
	f.mu.Lock()
	select {
	case <-f.done: // closed while opening (halt, or its peer went away)
		f.mu.Unlock()
		f.free()
		return
	default:
	}
	f.u.opened()
	f.ready = true
	pending := f.pending
	f.pending = nil
	f.mu.Unlock()
	r.e.stats.open.Add(1)
	r.e.stats.total.Add(1)
	scratch := make([]byte, flowIDLen+udpReadBuf)
	for _, b := range pending {
		f.send(b, scratch)
	}
}

// route connects the flow: a UDP server on this node directly (a
// connected socket to its target), else each provider of the plain id,
// then of the secure id, until one accepts the flow.
func (f *clientFlow) route() error {
	r := f.u.r
	k := r.e.key
	if h := r.reg.local(k); h != nil {
		if !h.udp {
			return fmt.Errorf("local server %s is not a udp tunnel", h.id)
		}
		return f.routeLocal(h)
	}
	if r.d.Mesh == nil {
		return errNoServer
	}
	last := errNoServer
	for _, c := range []struct {
		id     string
		secret []byte
	}{{k.Plain, nil}, {k.Secure, k.Secret}} {
		for _, p := range proofs.first(r.d.Mesh.Providers(c.id), c.id) {
			conn, ok := r.d.Mesh.Conn(p)
			if !ok {
				continue
			}
			key := flowKey{peer: p}
			for key.id == 0 || !f.u.tab.addClient(key, f) {
				key.id = randomFlowID()
			}
			// The id is taken before the handshake, which sends it; its
			// datagrams reach the socket once the flow is ready (deliver).
			f.mu.Lock()
			f.conn, f.key = conn, key
			f.mu.Unlock()
			s, err := openTunnel(r.ctx, conn, c.id, c.secret, key.id, r.d.OpenTimeout, r.d.HandshakeTimeout)
			if err != nil {
				f.u.tab.remove(key, f, false)
				f.mu.Lock()
				f.conn = nil
				f.mu.Unlock()
				last = fmt.Errorf("peer %s: %w", short(p), err)
				continue
			}
			streamClose(s)
			return nil
		}
	}
	return last
}

// routeLocal connects the flow to a UDP server on this node.
func (f *clientFlow) routeLocal(h *serverHandle) error {
	d := net.Dialer{Timeout: h.dial}
	nc, err := d.DialContext(f.u.r.ctx, "udp", h.target)
	if err != nil {
		h.stats.fail("dial " + h.target + ": " + err.Error())
		return fmt.Errorf("local server %s: dial %s: %w", h.id, h.target, err)
	}
	uc := nc.(*net.UDPConn)
	remove, ok := h.conns.add(f.close)
	if !ok {
		_ = uc.Close()
		return fmt.Errorf("local server %s stopped", h.id)
	}
	h.stats.open.Add(1)
	h.stats.total.Add(1)
	f.mu.Lock()
	f.local, f.h = uc, h
	prev := f.release
	f.release = func() {
		remove()
		h.stats.open.Add(-1)
		prev()
	}
	f.mu.Unlock()
	f.u.r.wg.Add(1)
	go f.readLocal(uc, h)
	return nil
}

// readLocal sends a local server's replies to the client socket until
// the flow closes its socket.
func (f *clientFlow) readLocal(uc *net.UDPConn, h *serverHandle) {
	defer f.u.r.wg.Done()
	buf := make([]byte, udpReadBuf)
	for {
		n, err := uc.Read(buf)
		if err != nil {
			select {
			case <-f.done:
				return
			default:
			}
			if transport.IsTransientSendErr(err) {
				continue // an ICMP unreachable from the target: UDP goes on
			}
			return
		}
		f.touch()
		if f.u.tab.tooLong(n) {
			h.stats.fail(fmt.Sprintf("udp datagram from %s dropped: longer than %d bytes", h.target, maxUDPRead))
			continue
		}
		h.stats.out.Add(int64(n))
		if m, err := f.u.pc.WriteToUDPAddrPort(buf[:n], f.src); err == nil {
			f.u.r.e.stats.in.Add(int64(m))
		} else {
			f.u.tab.lost(err)
		}
	}
}

// randomFlowID is a flow id: random, never 0 (0 means "not a flow").
func randomFlowID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}
