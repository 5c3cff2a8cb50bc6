package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/store"
	"peerdns/internal/view"
	"peerdns/messages"
	"peerdns/supervisor"
	"peerdns/transport"
)

// Deps are what the tunnels supervisor needs from the node. Zero
// tunables take the defaults in brackets.
type Deps struct {
	Self   string          // the local writer's id: clients need domains it owns
	Mesh   transport.Mesh  // the peer network (actors/peer)
	Store  *store.DB       // node.db: "tunnel:server:<id>", "tunnel:client:<id>"
	View   *view.Published // the naming view: domain owners and local IPs
	Ledger *actor.PID      // claims a server's domain (messages.AddDomain); nil: not claimed
	Log    *slog.Logger    // the tunnel log channel
	// Counters, when set, receive the data-path counters (diagnostics
	// read them); nil keeps them internal.
	Counters *Counters
	// Dialer, when set, is attached while the supervisor runs so other
	// parts of the process (the edge proxy) can open tunnel connections.
	Dialer *Dialer
	// LocalAddr, when set, says why a domain's address cannot be bound
	// (nil when it can): a client whose bind fails with "cannot assign
	// requested address" adds it to its error (internal/vif: the address
	// is not on the node's interface, and what would put it there).
	LocalAddr func(netip.Addr) error

	DialTimeout         time.Duration     // server → target TCP dial [5s]
	OpenTimeout         time.Duration     // client → opening a stream to a provider [10s]
	HandshakeTimeout    time.Duration     // a stream's TunnelOpen/Reply exchange [10s]
	ClaimTimeout        time.Duration     // the ledger's answer to AddDomain [15s]
	MaxStreamsPerPeer   int               // inbound tunnel streams per peer at once [4096]
	MaxStreamsPerTunnel int               // one server's TCP connections at once, all peers and this node's clients together [4096]
	MaxConnsPerClient   int               // local TCP connections one client carries at once [4096]
	LookupBackoff       transport.Backoff // a client looking for its server [100ms .. 5s]
	Recheck             time.Duration     // a running client checks its server is still there [2s]
	UDPIdleTimeout      time.Duration     // a UDP flow with no datagram either way ends [60s]
	MaxFlowsPerPeer     int               // UDP flows a peer may hold on our servers (and one client's sockets) [1024]
}

// Counters are the tunnels supervisor's data-path counters. Safe for
// concurrent use.
type Counters struct {
	// RefusedStreams counts streams refused: a bad or missing handshake,
	// an unknown id, a missing or wrong proof, a peer or a tunnel at its
	// stream cap (a local client at the tunnel cap counts too).
	RefusedStreams atomic.Int64
	// RefusedConns counts local connections a TCP client reset at once
	// because it carried Deps.MaxConnsPerClient already.
	RefusedConns atomic.Int64
	// DroppedDatagrams counts UDP datagrams dropped: refused by the
	// host when written to a socket (transport.IsTransientSendErr), over the QUIC
	// datagram limit, or from a client socket beyond the flow cap or
	// queued beyond a handshake's backlog.
	DroppedDatagrams atomic.Int64
}

func (d *Deps) defaults() {
	if d.Counters == nil {
		d.Counters = &Counters{}
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	def := func(v *time.Duration, x time.Duration) {
		if *v <= 0 {
			*v = x
		}
	}
	def(&d.DialTimeout, 5*time.Second)
	def(&d.OpenTimeout, 10*time.Second)
	def(&d.HandshakeTimeout, 10*time.Second)
	def(&d.ClaimTimeout, 15*time.Second)
	def(&d.Recheck, 2*time.Second)
	def(&d.UDPIdleTimeout, 60*time.Second)
	if d.MaxFlowsPerPeer <= 0 {
		d.MaxFlowsPerPeer = 1024
	}
	if d.MaxStreamsPerPeer <= 0 {
		d.MaxStreamsPerPeer = 4096
	}
	if d.MaxStreamsPerTunnel <= 0 {
		d.MaxStreamsPerTunnel = 4096
	}
	if d.MaxConnsPerClient <= 0 {
		d.MaxConnsPerClient = 4096
	}
	if d.LookupBackoff.Min <= 0 {
		d.LookupBackoff.Min = 100 * time.Millisecond
	}
	if d.LookupBackoff.Max <= 0 {
		d.LookupBackoff.Max = 5 * time.Second
	}
}

// Props builds the tunnels supervisor. It restarts crashed server and
// client actors with backoff; a restart of the supervisor itself reloads
// everything from the store.
func Props(d Deps) *actor.Props {
	d.defaults()
	return actor.PropsFromProducer(func() actor.Actor { return &Actor{d: d} },
		actor.WithSupervisor(supervisor.Backoff()))
}

// serverEntry is one configured server. rec and key are immutable; the
// state is set by the supervisor as its actor reports (serverUp,
// serverDown).
type serverEntry struct {
	rec   serverRecord
	key   serverKey
	pid   *actor.PID
	stats *stats // outlives the server's restarts
	state atomic.Pointer[string]
}

func (e *serverEntry) setState(s string) { e.state.Store(&s) }

func (e *serverEntry) info() messages.TunnelServer {
	st := messages.TunnelStopped
	if p := e.state.Load(); p != nil {
		st = *p
	}
	info := messages.TunnelServerInfo{State: st, TunnelCounters: e.stats.counters()}
	if st == messages.TunnelRunning {
		info.URL = e.key.URL
	}
	return messages.TunnelServer{ID: e.rec.ID, Opts: e.rec.Opts, Info: info}
}

// clientEntry is one configured client.
type clientEntry struct {
	rec    clientRecord
	key    clientKey
	pid    *actor.PID
	stats  *stats
	status clientStatus
	// prev, for an entry made by a move (retarget), completes once the
	// actor of the client's previous key stopped; pid is nil until then.
	prev *actor.Future
}

// clientStatus is a client's state as listed; written by its runner.
type clientStatus struct {
	mu    sync.Mutex // guards the fields below
	state string
	err   string
	addr  string
}

// set changes the status and reports whether it changed.
func (s *clientStatus) set(state, err, addr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == state && s.err == err && s.addr == addr {
		return false
	}
	s.state, s.err, s.addr = state, err, addr
	return true
}

func (s *clientStatus) get() (state, err, addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == "" {
		return messages.TunnelStopped, s.err, s.addr
	}
	return s.state, s.err, s.addr
}

func (e *clientEntry) info() messages.TunnelClient {
	st, err, addr := e.status.get()
	return messages.TunnelClient{ID: e.rec.ID, Opts: e.rec.Opts, Info: messages.TunnelClientInfo{
		State: st, Error: err, Address: addr, TunnelCounters: e.stats.counters(),
	}}
}

// Internal messages between the supervisor and its children.
type (
	// serverUp: an incarnation of e's server runs; streams for it are
	// dispatched.
	serverUp struct {
		h *serverHandle
		e *serverEntry
	}
	// serverDown: that incarnation stopped.
	serverDown struct {
		h *serverHandle
		e *serverEntry
	}
)

// Actor is the tunnels supervisor. Fields are touched only from Receive.
type Actor struct {
	d       Deps
	ev      *events
	reg     *registry
	acc     *acceptor
	cancel  context.CancelFunc // ends acc's context
	halted  bool               // stopping: announce nothing more (children still report serverDown)
	servers map[string]*serverEntry
	clients map[string]*clientEntry
	fol     follower        // following the claim in force (follow.go)
	subAll  map[string]bool // domains with subscribe-all on (subscriptions.go)
}

// Receive handles one message.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.start(c)
	case *actor.Stopping, *actor.Restarting:
		a.halt()
	case *serverUp:
		a.serverUp(m.h, m.e)
	case *serverDown:
		if a.reg.drop(m.h) {
			a.announce()
		}
		if a.servers[m.h.id] == m.e {
			m.e.setState(messages.TunnelStopped)
			a.ev.hint(messages.HintTunnel)
		}
	case *messages.CreateTunnelServer:
		id, err := a.createServer(c, m.Opts)
		c.Respond(&messages.CreateTunnelServerReply{ID: id, Err: err})
	case *messages.DeleteTunnelServer:
		a.deleteServer(c, m.ID)
	case *messages.RestartTunnelServer:
		e := a.servers[m.ID]
		if e == nil {
			c.Respond(&messages.TunnelWriteReply{Err: unknown(m.ID)})
			return
		}
		c.RequestWithCustomSender(e.pid, m, c.Sender())
	case *messages.GetTunnelServers:
		c.Respond(&messages.GetTunnelServersReply{Servers: a.listServers()})
	case *messages.CreateTunnelClient:
		a.createClient(c, m.Opts)
	case *messages.DeleteTunnelClient:
		a.deleteClient(c, m.ID)
	case *messages.RestartTunnelClient:
		e := a.clients[m.ID]
		if e == nil {
			c.Respond(&messages.TunnelWriteReply{Err: unknown(m.ID)})
			return
		}
		if e.pid == nil { // being moved onto a new key: it starts afresh once the old actor stopped
			a.replyAfter(c, &messages.TunnelWriteReply{}, e.prev)
			return
		}
		c.RequestWithCustomSender(e.pid, m, c.Sender())
	case *messages.GetTunnelClients:
		c.Respond(&messages.GetTunnelClientsReply{Clients: a.listClients()})
	default:
		a.receiveServices(c)
	}
}

func unknown(id string) error { return fmt.Errorf("%w %q", messages.ErrUnknownTunnel, id) }

func (a *Actor) start(c actor.Context) {
	a.ev = &events{log: a.d.Log, stream: c.ActorSystem().EventStream}
	a.reg = newRegistry(a.d.MaxStreamsPerPeer, &a.d.Counters.RefusedStreams)
	a.reg.flows = newFlowTable(a.d.MaxFlowsPerPeer, a.d.UDPIdleTimeout, &a.d.Counters.DroppedDatagrams)
	a.servers = map[string]*serverEntry{}
	a.clients = map[string]*clientEntry{}
	a.subAll = map[string]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.acc = &acceptor{reg: a.reg, ev: a.ev, handshake: a.d.HandshakeTimeout, ctx: ctx}
	a.d.Dialer.attach(a.d, a.reg, ctx)
	if a.d.Mesh != nil {
		a.d.Mesh.HandleStreams(a.acc.serve)
		a.d.Mesh.HandleDatagrams(a.acc.datagram)
	}
	a.load(c)
	a.startFollow(c)
}

// halt refuses streams from now on and withdraws our ids; the children
// stop after Stopping returns (protoactor stops them and waits).
func (a *Actor) halt() {
	a.halted = true
	a.d.Dialer.detach()
	a.stopFollow()
	if a.cancel != nil {
		a.cancel()
	}
	if a.d.Mesh != nil {
		a.d.Mesh.Announce(nil)
	}
}

func (a *Actor) announce() {
	if a.d.Mesh != nil && !a.halted {
		a.d.Mesh.Announce(a.reg.ids())
	}
}

// load starts every persisted server and client again.
func (a *Actor) load(c actor.Context) {
	if a.d.Store == nil {
		return
	}
	servers, bad, err := loadRecords[serverRecord](a.d.Store, serverPrefix)
	if err != nil {
		panic(err) // the store is broken: restart with backoff
	}
	clients, badc, err := loadRecords[clientRecord](a.d.Store, clientPrefix)
	if err != nil {
		panic(err)
	}
	for _, k := range append(bad, badc...) {
		a.ev.emit(slog.LevelError, "", "stored tunnel does not decode; skipped", "key", k)
	}
	for _, r := range servers {
		opts, err := normServerOpts(r.Opts)
		if err != nil || r.Seed == "" {
			a.ev.emit(slog.LevelError, r.ID, "stored tunnel server no longer validates; skipped", "err", err)
			continue
		}
		r.Opts = opts
		a.spawnServer(c, r)
	}
	for _, r := range clients {
		opts, key, err := normClientOpts(r.Opts)
		if err != nil {
			a.ev.emit(slog.LevelError, r.ID, "stored tunnel client no longer validates; skipped", "err", err)
			continue
		}
		r.Opts = opts
		a.spawnClient(c, r, key)
	}
	a.loadSubscribeAll()
	for _, d := range a.ownedDomains() {
		a.syncServices(c, d) // a crash may have come between the client and its claim write
	}
}

func (a *Actor) createServer(c actor.Context, o messages.TunnelServerOpts) (string, error) {
	o, err := normServerOpts(o)
	if err == nil {
		err = checkServerName(o.Name)
	}
	if err != nil {
		return "", err
	}
	seed := o.Key
	if seed == "" {
		seed = randomSeed()
	}
	o.Key = ""
	key := deriveServerKey(seed, o.Secure)
	for _, e := range a.servers {
		if e.key.Announced == key.Announced {
			return "", badf("server %s already serves this key", e.rec.ID)
		}
	}
	r := serverRecord{ID: newID(), Opts: o, Seed: seed, Created: time.Now().UnixNano()}
	if a.d.Store != nil {
		if err := saveJSON(a.d.Store, serverPrefix+r.ID, r); err != nil {
			return "", err
		}
	}
	a.spawnServer(c, r)
	a.ev.emit(slog.LevelInfo, r.ID, "tunnel server created", "target", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)), "secure", o.Secure)
	a.ev.hint(messages.HintTunnel)
	return r.ID, nil
}

func (a *Actor) spawnServer(c actor.Context, r serverRecord) {
	e := &serverEntry{rec: r, key: deriveServerKey(r.Seed, r.Opts.Secure), stats: &stats{}}
	e.setState(messages.TunnelStarting)
	e.pid = c.Spawn(serverProps(a.d, a.ev, e))
	a.servers[r.ID] = e
}

// serverUp dispatches streams to h and announces it, then shows e
// running. The incarnation of a server deleted meanwhile (its actor is
// stopping) is ignored: a server created since with the same key has its
// announced id.
func (a *Actor) serverUp(h *serverHandle, e *serverEntry) {
	if a.servers[h.id] != e {
		return
	}
	a.reg.put(h)
	a.announce()
	e.setState(messages.TunnelRunning)
	a.ev.emit(slog.LevelInfo, h.id, "tunnel server running", "target", h.target, "announced", e.key.Announced)
	a.ev.hint(messages.HintTunnel)
}

func (a *Actor) deleteServer(c actor.Context, id string) {
	e := a.servers[id]
	if e == nil {
		c.Respond(&messages.TunnelWriteReply{Err: unknown(id)})
		return
	}
	if a.d.Store != nil {
		if err := a.d.Store.Delete(serverPrefix + id); err != nil {
			c.Respond(&messages.TunnelWriteReply{Err: fmt.Errorf("forget server %s: %w", id, err)})
			return
		}
	}
	delete(a.servers, id)
	// Stop dispatching to it now; its actor closes its connections.
	if h := a.reg.lookup(e.key.Announced); h != nil && h.id == id && a.reg.drop(h) {
		a.announce()
	}
	a.ev.emit(slog.LevelInfo, id, "tunnel server deleted")
	a.ev.hint(messages.HintTunnel)
	a.stopThenReply(c, &messages.TunnelWriteReply{}, e.pid)
}

// stopThenReply stops children and answers the request with reply once
// they stopped (their connections are closed and their ports are free by
// then), without blocking Receive. Nil pids are skipped.
func (a *Actor) stopThenReply(c actor.Context, reply any, pids ...*actor.PID) {
	var fs []*actor.Future
	for _, pid := range pids {
		if pid != nil {
			fs = append(fs, c.StopFuture(pid))
		}
	}
	a.replyAfter(c, reply, fs...)
}

// stopClient stops e's actor and returns a future that completes once it
// stopped. While e is being moved (retarget) it has no actor yet: the
// future is then that of the actor it is moved from (e's own is not
// spawned once e left the table).
func (a *Actor) stopClient(c actor.Context, e *clientEntry) *actor.Future {
	if e.pid != nil {
		return c.StopFuture(e.pid)
	}
	return e.prev
}

// replyAfter answers the request with reply once every future in fs
// completed, without blocking Receive. Nil futures are skipped.
func (a *Actor) replyAfter(c actor.Context, reply any, fs ...*actor.Future) {
	sender := c.Sender()
	fs = slices.DeleteFunc(fs, func(f *actor.Future) bool { return f == nil })
	var wait func(i int)
	wait = func(i int) {
		if i == len(fs) {
			if sender != nil {
				c.Send(sender, reply)
			}
			return
		}
		c.ReenterAfter(fs[i], func(any, error) { wait(i + 1) })
	}
	wait(0)
}

func (a *Actor) listServers() []messages.TunnelServer {
	es := make([]*serverEntry, 0, len(a.servers))
	for _, e := range a.servers {
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool {
		if es[i].rec.Created != es[j].rec.Created {
			return es[i].rec.Created < es[j].rec.Created
		}
		return es[i].rec.ID < es[j].rec.ID
	})
	out := make([]messages.TunnelServer, 0, len(es))
	for _, e := range es {
		out = append(out, e.info())
	}
	return out
}

// createClient answers tunnel-client-create: the domain must be owned
// here, i.e. its claim in force is the local writer's. The view knows the
// resolved claimant; a lost claim with hash preference "local" is also in
// force here, which only the ledger knows, so it is asked then.
func (a *Actor) createClient(c actor.Context, o messages.TunnelClientOpts) {
	sender := c.Sender()
	reply := func(id string, err error) {
		if sender != nil {
			c.Send(sender, &messages.CreateTunnelClientReply{ID: id, Err: err})
		}
	}
	o, key, err := normClientOpts(o)
	if err != nil {
		reply("", err)
		return
	}
	notOwned := fmt.Errorf("%w: %s", messages.ErrDomainNotOwned, o.Domain)
	dom := a.viewDomain(o.Domain)
	if dom == nil || a.d.Self == "" {
		reply("", notOwned)
		return
	}
	if dom.Claimant == a.d.Self {
		reply(a.newClient(c, o, key, followOf(o.Key, dom.Hash)))
		return
	}
	if a.d.Ledger == nil {
		reply("", notOwned)
		return
	}
	f := c.RequestFuture(a.d.Ledger, &messages.GetDomainTargets{Domains: []string{o.Domain}}, a.d.ClaimTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		rep, ok := res.(*messages.GetDomainTargetsReply)
		if err != nil || !ok {
			reply("", fmt.Errorf("ask the ledger who owns %s: %v", o.Domain, err))
			return
		}
		t, ok := rep.Targets[o.Domain]
		if !ok || !t.Owned {
			reply("", notOwned)
			return
		}
		reply(a.newClient(c, o, key, followOf(o.Key, t.Hash)))
	})
}

// viewDomain is the domain in the current view (nil when absent).
func (a *Actor) viewDomain(name string) *view.Domain {
	if a.d.View == nil {
		return nil
	}
	if s := a.d.View.Load(); s != nil {
		return s.Domains[name]
	}
	return nil
}

// newClient creates, persists and starts a client from normalised opts;
// follow says what it follows (follow.go). Ownership is the caller's
// business: subscription clients are made for domains of others.
func (a *Actor) newClient(c actor.Context, o messages.TunnelClientOpts, key clientKey, follow string) (string, error) {
	id := newID()
	if o.ServiceName != "" {
		id = o.Domain + "_" + o.ServiceName
	}
	if a.clients[id] != nil {
		return "", badf("tunnel client %q already exists", id)
	}
	if r := (clientRecord{Opts: o, Follow: follow}); r.isService() && a.knownSecret(key) {
		return "", badf("the key is a secure server's secret: a service's key is written into the domain's claim, which every peer reads")
	}
	// A TCP and a UDP client bind different sockets: they may share a port.
	for _, e := range a.clients {
		if eo := e.rec.Opts; eo.Domain == o.Domain && eo.Port == o.Port && eo.Protocol == o.Protocol {
			return "", badf("tunnel client %s already listens on %s %s port %d", e.rec.ID, o.Domain, o.Protocol, o.Port)
		}
	}
	if dom := a.viewDomain(o.Domain); dom != nil && dom.IP.IsValid() && o.Port < 1024 {
		if err := probePrivilege(dom.IP, o.Port); err != nil {
			return "", err
		}
	}
	r := clientRecord{ID: id, Opts: o, Follow: follow, Created: time.Now().UnixNano()}
	if a.d.Store != nil {
		if err := saveJSON(a.d.Store, clientPrefix+id, r); err != nil {
			return "", err
		}
	}
	a.spawnClient(c, r, key)
	a.ev.emit(slog.LevelInfo, id, "tunnel client created", "domain", o.Domain, "port", o.Port, "follow", follow)
	a.ev.hint(messages.HintTunnelClients)
	if r.isOwned() {
		a.syncServices(c, o.Domain)
	}
	return id, nil
}

// knownSecret reports whether k is known here to be a secure server's
// secret: a secure server on this node has it, or a peer announces its
// secure id (only a holder of the secret announces that id).
func (a *Actor) knownSecret(k clientKey) bool {
	for _, e := range a.servers {
		if e.key.Secret != nil && e.key.Announced == k.Secure {
			return true
		}
	}
	return a.d.Mesh != nil && len(a.d.Mesh.Providers(k.Secure)) > 0
}

// probePrivilege binds ip:port once to find out whether this process may
// use a port below 1024, so the request fails with advice instead of a
// client stuck in error.
func probePrivilege(ip netip.Addr, port int) error {
	ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, uint16(port)).String())
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return privilegeErr(netip.AddrPortFrom(ip, uint16(port)).String(), err)
		}
		return nil // busy or similar: the client reports it and retries
	}
	ln.Close()
	return nil
}

// privilegeErr says how to allow a port below 1024.
func privilegeErr(addr string, err error) error {
	return fmt.Errorf("listen %s: %w: ports below 1024 need privileges: run the node as root (with --system), "+
		"or allow its binary once with `sudo setcap cap_net_bind_service=+ep $(command -v peerdns)`", addr, err)
}

func (a *Actor) spawnClient(c actor.Context, r clientRecord, key clientKey) {
	e := &clientEntry{rec: r, key: key, stats: &stats{}}
	e.status.set(messages.TunnelStarting, "", "")
	e.pid = c.Spawn(clientProps(a.d, a.ev, a.reg, e))
	a.clients[r.ID] = e
}

func (a *Actor) deleteClient(c actor.Context, id string) {
	e := a.clients[id]
	if e == nil {
		c.Respond(&messages.TunnelWriteReply{Err: unknown(id)})
		return
	}
	if a.d.Store != nil {
		if err := a.d.Store.Delete(clientPrefix + id); err != nil {
			c.Respond(&messages.TunnelWriteReply{Err: fmt.Errorf("forget client %s: %w", id, err)})
			return
		}
	}
	a.forgetClient(c, e)
	a.replyAfter(c, &messages.TunnelWriteReply{}, a.stopClient(c, e))
}

// forgetClient drops a client (already gone from the store) from the
// table and, for an owned client, from the domain's claim. A subscription
// client deleted by id ends its subscription with it.
func (a *Actor) forgetClient(c actor.Context, e *clientEntry) {
	delete(a.clients, e.rec.ID)
	a.ev.emit(slog.LevelInfo, e.rec.ID, "tunnel client deleted")
	a.ev.hint(messages.HintTunnelClients)
	if e.rec.isOwned() {
		a.syncServices(c, e.rec.Opts.Domain)
	}
}

func (a *Actor) listClients() []messages.TunnelClient {
	es := a.listEntries()
	out := make([]messages.TunnelClient, 0, len(es))
	for _, e := range es {
		out = append(out, e.info())
	}
	return out
}

// listEntries are the clients in listing order (creation, then id).
func (a *Actor) listEntries() []*clientEntry {
	es := make([]*clientEntry, 0, len(a.clients))
	for _, e := range a.clients {
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool {
		if es[i].rec.Created != es[j].rec.Created {
			return es[i].rec.Created < es[j].rec.Created
		}
		return es[i].rec.ID < es[j].rec.ID
	})
	return es
}
