package peer

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
	"peerdns/transport"
)

// Mesh is the peer network as the tunnel layer sees it (transport.Mesh).
// The node makes one with NewMesh and hands it to the peers supervisor
// (Deps.Mesh) and to the tunnel layer.
//
// Conn and Providers are on the tunnel data path: they read an immutable
// snapshot through an atomic.Pointer and never wait on an actor or a
// lock. The snapshot is written only by the peers supervisor: an
// established session's connection is added when the supervisor learns
// it is up and removed when the session ends or is replaced; a peer's
// announced ids live exactly as long as its connection, so Providers
// never names a peer we have no connection to. Safe for concurrent use.
type Mesh struct {
	state   atomic.Pointer[meshState]
	own     atomic.Pointer[[]string] // our announced ids, sorted; never modified after store
	handler atomic.Pointer[streamHandler]
	grams   atomic.Pointer[datagramHandler]
	owner   atomic.Pointer[meshOwner]
	// wmu serialises writers (the supervisor's updates, Announce); the
	// readers above never take it.
	wmu sync.Mutex
}

var _ transport.Mesh = (*Mesh)(nil)

// meshState is one version of the peers the tunnel layer can use. Never
// modified after it is stored: writers copy the maps they change.
type meshState struct {
	conns map[string]transport.Conn // peer id → its established connection
	// used: peer id → when the tunnel layer last asked for its connection
	// (Unix ns), so the overlay keeps that session (view.go). The counter
	// is shared by every version for as long as the connection lives.
	used      map[string]*atomic.Int64
	announced map[string][]string // peer id → the ids it announces, sorted
	providers map[string][]string // tunnel id → peers announcing it, sorted
}

type streamHandler struct {
	fn func(transport.Conn, transport.Stream)
}

type datagramHandler struct {
	fn func(transport.Conn, []byte)
}

// meshOwner is the peers supervisor that keeps the mesh, told when
// Announce changes our set.
type meshOwner struct {
	root *actor.RootContext
	pid  *actor.PID
	log  *slog.Logger
}

// NewMesh returns a mesh with no connections, no announced ids and no
// stream handler (streams peers open are reset until HandleStreams).
func NewMesh() *Mesh {
	m := &Mesh{}
	m.state.Store(emptyMeshState())
	m.own.Store(&[]string{})
	return m
}

func emptyMeshState() *meshState {
	return &meshState{conns: map[string]transport.Conn{}, used: map[string]*atomic.Int64{}, announced: map[string][]string{}, providers: map[string][]string{}}
}

// Conn is the established connection to peerID. A connection that closed
// and that the supervisor has not removed yet is not returned.
func (m *Mesh) Conn(peerID string) (transport.Conn, bool) {
	st := m.state.Load()
	c, ok := st.conns[peerID]
	if !ok || closed(c) {
		return nil, false
	}
	if u := st.used[peerID]; u != nil {
		u.Store(time.Now().UnixNano())
	}
	return c, true
}

// Providers lists the connected peers whose latest announcement contains
// id, sorted by peer id. The caller owns the returned slice.
func (m *Mesh) Providers(id string) []string {
	st := m.state.Load()
	ps := st.providers[id]
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if !closed(st.conns[p]) {
			out = append(out, p)
		}
	}
	return out
}

func closed(c transport.Conn) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// Announce replaces the set of tunnel ids this node serves. Ids that are
// not 64 lowercase hex are dropped, duplicates folded, and only the first
// MaxTunnelIDs (sorted) kept, each with a warning: peers would refuse the
// whole announcement otherwise. Connected peers get the new set at once,
// peers that connect later when their session is established.
func (m *Mesh) Announce(ids []string) {
	set := make([]string, 0, len(ids))
	bad := 0
	for _, id := range ids {
		if messages.ValidTunnelID(id) {
			set = append(set, id)
		} else {
			bad++
		}
	}
	slices.Sort(set)
	set = slices.Compact(set)
	over := 0
	if len(set) > messages.MaxTunnelIDs {
		over = len(set) - messages.MaxTunnelIDs
		set = set[:messages.MaxTunnelIDs:messages.MaxTunnelIDs]
	}
	o := m.owner.Load()
	if bad > 0 || over > 0 {
		log := slog.Default()
		if o != nil {
			log = o.log
		}
		log.Warn("tunnel ids not announced", "invalid", bad, "overCap", over, "cap", messages.MaxTunnelIDs)
	}
	m.wmu.Lock()
	same := slices.Equal(*m.own.Load(), set)
	if !same {
		m.own.Store(&set)
	}
	m.wmu.Unlock()
	if !same && o != nil {
		// The supervisor reads the newest set when this arrives, so a
		// burst of Announce calls ends with every peer holding the last.
		o.root.Send(o.pid, &announceTunnels{})
	}
}

// HandleStreams sets the function that gets every stream a peer opens on
// an established connection (nil: reset them). It runs in a goroutine of
// its own per stream and must close the stream.
func (m *Mesh) HandleStreams(h func(c transport.Conn, s transport.Stream)) {
	if h == nil {
		m.handler.Store(nil)
		return
	}
	m.handler.Store(&streamHandler{fn: h})
}

// HandleDatagrams sets the function that gets every datagram a peer
// sends on an established connection (nil: drop them). It runs on that
// connection's receive loop and must not block.
func (m *Mesh) HandleDatagrams(h func(c transport.Conn, b []byte)) {
	if h == nil {
		m.grams.Store(nil)
		return
	}
	m.grams.Store(&datagramHandler{fn: h})
}

// ownIDs is our announced set (sorted, shared: do not modify).
func (m *Mesh) ownIDs() []string { return *m.own.Load() }

// usedSince reports whether the tunnel layer asked for peer's
// connection at or after t.
func (m *Mesh) usedSince(peer string, t time.Time) bool {
	u := m.state.Load().used[peer]
	return u != nil && u.Load() >= t.UnixNano()
}

// announcedBy is how many ids peer announces now.
func (m *Mesh) announcedBy(peer string) int { return len(m.state.Load().announced[peer]) }

// attach makes the supervisor at pid the mesh's owner. Connections of a
// previous owner (a supervisor that restarted) are gone with its
// sessions, so the state starts empty.
func (m *Mesh) attach(root *actor.RootContext, pid *actor.PID, log *slog.Logger) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.owner.Store(&meshOwner{root: root, pid: pid, log: log})
	m.state.Store(emptyMeshState())
}

// detach forgets the owner at pid and every connection.
func (m *Mesh) detach(pid *actor.PID) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if o := m.owner.Load(); o != nil && o.pid.Equal(pid) {
		m.owner.Store(nil)
		m.state.Store(emptyMeshState())
	}
}

// setConn publishes peer's established connection. A different
// connection it replaces takes its announcement with it: the peer
// announces again on the new one.
func (m *Mesh) setConn(peer string, c transport.Conn) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	old := m.state.Load()
	if old.conns[peer] == c {
		return
	}
	st := old.withAnnounced(peer, nil)
	st.conns = maps.Clone(old.conns)
	st.conns[peer] = c
	st.used = maps.Clone(old.used)
	u := &atomic.Int64{}
	if prev := old.used[peer]; prev != nil {
		u.Store(prev.Load()) // a replaced connection keeps its pin
	}
	st.used[peer] = u
	m.state.Store(st)
}

// dropConn removes peer's connection and announcement, if c is still the
// published connection (a newer session may have replaced it).
func (m *Mesh) dropConn(peer string, c transport.Conn) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	old := m.state.Load()
	if cur, ok := old.conns[peer]; !ok || cur != c {
		return
	}
	st := old.withAnnounced(peer, nil)
	st.conns = maps.Clone(old.conns)
	delete(st.conns, peer)
	st.used = maps.Clone(old.used)
	delete(st.used, peer)
	m.state.Store(st)
}

// setAnnounced replaces what peer announces (ids valid, any order); nil
// withdraws it. Ignored when peer has no published connection.
func (m *Mesh) setAnnounced(peer string, ids []string) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	old := m.state.Load()
	if _, ok := old.conns[peer]; !ok {
		return
	}
	set := slices.Clone(ids)
	slices.Sort(set)
	set = slices.Compact(set)
	m.state.Store(old.withAnnounced(peer, set))
}

// withAnnounced returns a copy of s (sharing conns and every untouched
// providers entry) where peer announces set (sorted, deduplicated).
func (s *meshState) withAnnounced(peer string, set []string) *meshState {
	prev := s.announced[peer]
	st := &meshState{conns: s.conns, used: s.used, announced: s.announced, providers: s.providers}
	if slices.Equal(prev, set) {
		return st
	}
	st.announced = maps.Clone(s.announced)
	if len(set) == 0 {
		delete(st.announced, peer)
	} else {
		st.announced[peer] = set
	}
	st.providers = maps.Clone(s.providers)
	for _, id := range prev {
		if _, still := slices.BinarySearch(set, id); still {
			continue
		}
		ps := st.providers[id]
		if i, ok := slices.BinarySearch(ps, peer); ok {
			ps = slices.Delete(slices.Clone(ps), i, i+1)
		}
		if len(ps) == 0 {
			delete(st.providers, id)
		} else {
			st.providers[id] = ps
		}
	}
	for _, id := range set {
		if _, had := slices.BinarySearch(prev, id); had {
			continue
		}
		ps := st.providers[id]
		if i, ok := slices.BinarySearch(ps, peer); !ok {
			st.providers[id] = slices.Insert(slices.Clone(ps), i, peer)
		}
	}
	return st
}

// serveStreams hands every stream the peer opens on an established
// connection to the mesh's handler, each in its own goroutine, until ctx
// ends or the connection closes. It starts only once the session is
// established, so a peer that is never admitted never reaches the
// handler: its streams wait in quic-go (bounded by MaxIncomingStreams and
// the connection window) and die with the connection. With no handler a
// stream is reset, which also gives the peer its stream credit back.
//
// The connection's datagrams are served alongside (serveDatagrams) for
// exactly as long: serveStreams returns only once that loop ended too.
func serveStreams(ctx context.Context, conn transport.Conn, m *Mesh) {
	ctx, cancel := context.WithCancel(ctx)
	grams := make(chan struct{})
	go func() {
		defer close(grams)
		serveDatagrams(ctx, conn, m)
	}()
	defer func() {
		cancel()
		<-grams
	}()
	for {
		st, err := conn.AcceptStream(ctx)
		if err != nil {
			return
		}
		h := m.handler.Load()
		if h == nil {
			transport.ResetStream(st)
			continue
		}
		go h.fn(conn, st)
	}
}

// serveDatagrams hands every datagram the peer sends on an established
// connection to the mesh's datagram handler, one after another, until
// ctx ends or the connection closes. It keeps reading with no handler
// (dropping them), so quic-go's receive queue never fills with stale
// datagrams. Like streams, a peer's datagrams reach the handler only
// once its session is established.
func serveDatagrams(ctx context.Context, conn transport.Conn, m *Mesh) {
	for {
		b, err := conn.ReceiveDatagram(ctx)
		if err != nil {
			return
		}
		if h := m.grams.Load(); h != nil {
			h.fn(conn, b)
		}
	}
}
