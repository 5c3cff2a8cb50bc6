package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
	"peerdns/transport"
)

// clientActor owns one tunnel client: an incarnation (clientRun) with its
// listener, its connections and its lookup of the server. Fields are
// touched only from Receive.
type clientActor struct {
	d   Deps
	ev  *events
	reg *registry
	e   *clientEntry
	run *clientRun
}

func clientProps(d Deps, ev *events, reg *registry, e *clientEntry) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &clientActor{d: d, ev: ev, reg: reg, e: e} })
}

// Receive handles one message.
func (a *clientActor) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started:
		a.start()
	case *actor.Stopping, *actor.Restarting:
		a.stop()
	case *wakeClient:
		if a.run != nil {
			a.run.wake()
		}
	case *messages.RestartTunnelClient:
		// Frees the port and closes every connection before binding again.
		a.stop()
		a.start()
		a.ev.emit(slog.LevelInfo, a.e.rec.ID, "tunnel client restarted")
		c.Respond(&messages.TunnelWriteReply{})
	}
}

func (a *clientActor) start() {
	a.run = startClient(a.d, a.ev, a.reg, a.e)
}

// stop ends the incarnation and waits for its goroutines: they only wait
// on the listener, the connections and the context, all closed here.
func (a *clientActor) stop() {
	if a.run == nil {
		return
	}
	a.run.halt()
	a.run = nil
	a.setStatus(messages.TunnelStopped, "", "")
}

func (a *clientActor) setStatus(state, errMsg, addr string) {
	if a.e.status.set(state, errMsg, addr) {
		a.ev.hint(messages.HintTunnelClients)
	}
}

// clientRun is one incarnation of a client: it binds the domain's local
// IP and port (retrying with backoff), keeps looking whether its server
// can be reached, and carries each accepted connection over one stream.
type clientRun struct {
	d   Deps
	ev  *events
	reg *registry
	e   *clientEntry

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	conns  *connSet
	kick   chan struct{} // cuts a wait short: binding again, looking for the server

	active atomic.Int64 // local TCP connections being carried (Deps.MaxConnsPerClient)

	mu    sync.Mutex // guards ln, addr and bound
	ln    net.Listener
	addr  string
	bound bool // the socket is bound: the lookup's state applies
}

func startClient(d Deps, ev *events, reg *registry, e *clientEntry) *clientRun {
	r := &clientRun{d: d, ev: ev, reg: reg, e: e, conns: newConnSet(), kick: make(chan struct{}, 1)}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.status(messages.TunnelStarting, "")
	r.wg.Add(1)
	if e.rec.Opts.Protocol == "udp" {
		go r.serveUDP()
	} else {
		go r.serve()
	}
	return r
}

func (r *clientRun) halt() {
	r.cancel()
	r.mu.Lock()
	if r.ln != nil {
		r.ln.Close()
	}
	r.mu.Unlock()
	r.conns.closeAll()
	r.wg.Wait()
}

func (r *clientRun) status(state, errMsg string) {
	r.mu.Lock()
	addr := r.addr
	r.mu.Unlock()
	if r.e.status.set(state, errMsg, addr) {
		r.ev.hint(messages.HintTunnelClients)
	}
}

// socketErr sorts an error of the client's listener or UDP socket: done
// when the run is ending, retry on a timeout; otherwise the socket is dead
// and the caller binds again.
func (r *clientRun) socketErr(err error) (done, retry bool) {
	if r.ctx.Err() != nil {
		return true, false
	}
	var ne net.Error
	// A UDP socket may report an ICMP error or a refused send of an
	// earlier datagram on a read: one datagram lost, not a dead socket.
	return false, (errors.As(err, &ne) && ne.Timeout()) || transport.IsTransientSendErr(err)
}

// serve binds and then accepts until the incarnation ends.
func (r *clientRun) serve() {
	defer r.wg.Done()
	ln := r.bind()
	if ln == nil {
		return
	}
	r.wg.Add(1)
	go r.lookup()
	var shortWait time.Duration // the pause after an Accept short of a resource
	for {
		conn, err := ln.Accept()
		if err != nil {
			if done, retry := r.socketErr(err); done {
				return
			} else if retry {
				continue
			}
			// Out of descriptors or memory for now: the listener and
			// the connections queued on it are fine, so wait and
			// accept again, as net/http's Server does (5 ms doubling
			// to 1 s), rather than reset them all by binding again.
			if shortOfResource(err) {
				shortWait = min(max(2*shortWait, 5*time.Millisecond), time.Second)
				r.e.stats.fail("accept: " + err.Error())
				r.ev.dataPath(slog.LevelWarn, r.e.rec.ID, "tunnel client cannot accept a connection; retrying", "err", err, "in", shortWait)
				if !r.sleep(shortWait) {
					return
				}
				continue
			}
			// A listener that fails otherwise is dead: report it and
			// bind again.
			r.ev.emit(slog.LevelError, r.e.rec.ID, "tunnel client listener failed", "err", err)
			ln.Close()
			if ln = r.bind(); ln == nil {
				return
			}
			r.wake() // the lookup says again whether the server is reachable
			continue
		}
		shortWait = 0
		if r.active.Add(1) > int64(r.d.MaxConnsPerClient) {
			r.active.Add(-1)
			r.refuseLocal(conn)
			continue
		}
		r.wg.Add(1)
		go func() {
			defer r.active.Add(-1)
			r.handle(conn)
		}()
	}
}

// shortOfResource reports whether an Accept error says the process or
// the host is short of descriptors, buffers or memory: it passes.
func shortOfResource(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// sleep waits d; false once the run ends. Unlike pause, wake does not
// cut it short.
func (r *clientRun) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// refuseLocal resets a local connection over the client's cap at once:
// a program that opens connections without end gets no goroutine, stream
// or wait per connection beyond Deps.MaxConnsPerClient. Counted and
// logged before the reset, so whoever sees the reset finds them.
func (r *clientRun) refuseLocal(conn net.Conn) {
	r.d.Counters.RefusedConns.Add(1)
	r.e.stats.fail(fmt.Sprintf("refused a local connection: %d connections open", r.d.MaxConnsPerClient))
	r.ev.dataPath(slog.LevelWarn, r.e.rec.ID, "tunnel connection refused: the client is at its connection cap", "cap", r.d.MaxConnsPerClient)
	tcpAbort(conn)
}

// bindLoop waits for the domain's local IP and calls listen on it and
// the client's port, retrying with backoff, until listen binds (true) or
// the incarnation ends (false). The state is starting while the domain
// has no IP and error while the bind fails (with how to allow a port
// below 1024). listen answers (true, nil) once bound and registered,
// (false, nil) when the run was halted meanwhile, or the bind's error.
// TCP (bind) and UDP (bindUDP) clients share it.
func (r *clientRun) bindLoop(what string, listen func(addr netip.AddrPort) (bool, error)) bool {
	o := r.e.rec.Opts
	b := r.d.LookupBackoff
	r.mu.Lock()
	r.bound = false // the lookup leaves the state to this loop until bound
	r.mu.Unlock()
	for r.ctx.Err() == nil {
		ip := r.domainIP()
		if !ip.IsValid() {
			r.status(messages.TunnelStarting, "domain "+o.Domain+" has no local IP yet")
		} else {
			addr := netip.AddrPortFrom(ip, uint16(o.Port))
			ok, err := listen(addr)
			if err == nil {
				if ok {
					r.ev.emit(slog.LevelInfo, r.e.rec.ID, what+" listening", "addr", addr.String())
				}
				return ok
			}
			if errors.Is(err, os.ErrPermission) && o.Port < 1024 {
				err = privilegeErr(addr.String(), err)
			}
			if errors.Is(err, syscall.EADDRNOTAVAIL) && r.d.LocalAddr != nil {
				if why := r.d.LocalAddr(ip); why != nil {
					err = fmt.Errorf("%w: %v", err, why)
				}
			}
			msg := err.Error()
			r.e.stats.fail(msg)
			if _, old, _ := r.e.status.get(); old != msg {
				r.ev.emit(slog.LevelError, r.e.rec.ID, what+" cannot listen", "err", err)
			}
			r.status(messages.TunnelError, msg)
		}
		if !r.pause(b.Next()) {
			return false
		}
	}
	return false
}

// bind listens for a TCP client; nil once the incarnation ends.
func (r *clientRun) bind() net.Listener {
	var ln net.Listener
	ok := r.bindLoop("tunnel client", func(addr netip.AddrPort) (bool, error) {
		l, err := net.Listen("tcp", addr.String())
		if err != nil {
			return false, err
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.ctx.Err() != nil { // halted meanwhile: halt saw no listener
			l.Close()
			return false, nil
		}
		r.ln, r.addr, r.bound, ln = l, addr.String(), true, l
		return true, nil
	})
	if !ok {
		return nil
	}
	return ln
}

func (r *clientRun) domainIP() netip.Addr {
	if r.d.View == nil {
		return netip.Addr{}
	}
	s := r.d.View.Load()
	if s == nil {
		return netip.Addr{}
	}
	if d := s.Domains[r.e.rec.Opts.Domain]; d != nil {
		return d.IP
	}
	return netip.Addr{}
}

// lookup keeps the state honest: running while the server can be
// reached (a local server or a peer that announces it), starting while
// not; it looks again with backoff, and at once after a failed
// connection. Connections are routed on their own (route), so a server
// that comes back is used by the next connection even before this loop
// notices.
func (r *clientRun) lookup() {
	defer r.wg.Done()
	b := r.d.LookupBackoff
	for {
		wait := r.d.Recheck
		if err := r.reachable(); err == nil {
			b.Reset()
			r.lookupStatus(messages.TunnelRunning, "")
		} else {
			r.lookupStatus(messages.TunnelStarting, err.Error())
			wait = b.Next()
		}
		if !r.pause(wait) {
			return
		}
	}
}

// lookupStatus sets the state the lookup found while the socket is
// bound; while it is bound again (a dead socket), bindLoop's state
// stands, so the two do not take turns.
func (r *clientRun) lookupStatus(state, errMsg string) {
	r.mu.Lock()
	changed := r.bound && r.e.status.set(state, errMsg, r.addr)
	r.mu.Unlock()
	if changed {
		r.ev.hint(messages.HintTunnelClients)
	}
}

// pause waits d, or less when woken (wake); false once the run ends.
func (r *clientRun) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return false
	case <-r.kick:
	case <-t.C:
	}
	return true
}

// reachable is nil when the server can be reached, else why not. A
// server on this node of the other protocol cannot: route refuses it.
func (r *clientRun) reachable() error {
	k := r.e.key
	if h := r.reg.local(k); h != nil {
		if udp := r.e.rec.Opts.Protocol == "udp"; h.udp != udp {
			if h.udp {
				return fmt.Errorf("local server %s is a udp tunnel", h.id)
			}
			return fmt.Errorf("local server %s is not a udp tunnel", h.id)
		}
		return nil
	}
	if r.d.Mesh != nil && (len(r.d.Mesh.Providers(k.Plain)) > 0 || len(r.d.Mesh.Providers(k.Secure)) > 0) {
		return nil
	}
	return errors.New("no peer serves this key yet")
}

func (r *clientRun) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// handle carries one accepted connection.
func (r *clientRun) handle(conn net.Conn) {
	defer r.wg.Done()
	remove, ok := r.conns.add(func() { tcpAbort(conn) })
	if !ok {
		tcpAbort(conn)
		return
	}
	defer remove()
	remote, extra, done, err := r.route()
	if err != nil {
		r.e.stats.fail(err.Error())
		r.ev.dataPath(slog.LevelWarn, r.e.rec.ID, "tunnel connection refused", "err", err)
		tcpAbort(conn)
		r.wake()
		return
	}
	defer done()
	removeRemote, ok := r.conns.add(remote.abort)
	if !ok {
		remote.abort()
		tcpAbort(conn)
		return
	}
	defer removeRemote()
	pipe(tcpSide{conn}, remote, append(extra, r.e.stats)...)
}

// errNoServer: no local server and no connected peer serves the key.
var errNoServer = errors.New("no peer serves this key")

func (r *clientRun) route() (remote side, extra []*stats, done func(), err error) {
	return route(r.ctx, r.d, r.reg, r.e.key)
}

// route finds the server for a new connection to key: a server on this
// node that key reaches (registry.local: never a secure one by its
// announced id) is dialed directly (its target, no stream); otherwise, or
// when that dial fails (a peer may serve the same seed), each provider of
// the plain id, then each provider of the secure id (those that proved
// the id first: proofs.first), until a stream opens and its handshake is
// accepted. extra are the local server's counters
// (nil for a stream); done releases what route took. Shared by tunnel
// clients and the Dialer.
func route(ctx context.Context, d Deps, reg *registry, k clientKey) (remote side, extra []*stats, done func(), err error) {
	last := errNoServer
	if h := reg.local(k); h != nil {
		if h.udp {
			return nil, nil, nil, fmt.Errorf("local server %s is a udp tunnel", h.id)
		}
		if !h.acquire() {
			reg.refused.Add(1)
			h.stats.fail("refused a connection of this node: too many streams on this tunnel")
			h.ev.dataPath(slog.LevelWarn, h.id, "refused local tunnel connection: tunnel is at its stream cap", "cap", h.maxStreams)
			return nil, nil, nil, fmt.Errorf("local server %s: too many streams", h.id)
		}
		if tc, err := h.dialTarget(ctx); err != nil {
			h.release()
			h.stats.fail("dial " + h.target + ": " + err.Error())
			last = fmt.Errorf("local server %s: dial %s: %w", h.id, h.target, err)
		} else {
			t := tcpSide{tc}
			if remove, ok := h.conns.add(t.abort); ok {
				return t, []*stats{h.stats}, func() { remove(); h.release() }, nil
			}
			// The server stopped meanwhile: a peer may serve the key too.
			h.release()
			t.abort()
		}
	}
	if d.Mesh == nil {
		return nil, nil, nil, last
	}
	for _, c := range []struct {
		id     string
		secret []byte
	}{{k.Plain, nil}, {k.Secure, k.Secret}} {
		for _, p := range proofs.first(d.Mesh.Providers(c.id), c.id) {
			conn, ok := d.Mesh.Conn(p)
			if !ok {
				continue
			}
			s, err := openTunnel(ctx, conn, c.id, c.secret, 0, d.OpenTimeout, d.HandshakeTimeout)
			if err != nil {
				last = fmt.Errorf("peer %s: %w", short(p), err)
				continue
			}
			return streamSide{s, conn.Done()}, nil, func() {}, nil
		}
	}
	return nil, nil, nil, last
}

// openTunnel opens a stream on conn and runs the client side of the
// handshake for id (with a proof when secret is not nil; registering
// flow when not 0, for a UDP tunnel).
func openTunnel(ctx context.Context, conn transport.Conn, id string, secret []byte, flow uint64, openTimeout, handshake time.Duration) (transport.Stream, error) {
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	s, err := conn.OpenStream(octx)
	if err != nil {
		return nil, fmt.Errorf("open stream: %w", err)
	}
	// Cancelling ctx (the client stops) ends a handshake in progress.
	stop := context.AfterFunc(ctx, func() { _ = s.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (transport.Stream, error) {
		stop()
		streamAbort(s)
		return nil, err
	}
	_ = s.SetDeadline(time.Now().Add(handshake))
	var p []byte
	if secret != nil {
		if p, err = proof(conn, id, secret); err != nil {
			return fail(err)
		}
	}
	known := proofs.known(conn, id)
	if err := writeFrame(s, &messages.TunnelOpen{ID: id, Proof: p, Flow: flow, Proven: known}); err != nil {
		return fail(fmt.Errorf("write tunnel open: %w", err))
	}
	var rep messages.TunnelOpenReply
	if err := readFrame(s, &rep); err != nil {
		return fail(fmt.Errorf("read tunnel reply: %w", err))
	}
	if rep.Err != "" {
		return fail(fmt.Errorf("server refused: %s", rep.Err))
	}
	// Anyone can announce an id it learnt from announcements or a claim:
	// only a server that proves it holds the key gets our traffic.
	if !known {
		if !checkServerProof(conn, id, secret, rep.Proof) {
			return fail(errors.New("server did not prove it holds the tunnel key"))
		}
		proofs.add(conn, id)
	}
	if !stop() {
		return fail(ctx.Err())
	}
	_ = s.SetDeadline(time.Time{})
	return s, nil
}
