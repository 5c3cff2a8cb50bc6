package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/api"
	"peerdns/agent/health"
	"peerdns/agent/store"
	"peerdns/messages"
	"peerdns/transport"
)

// ParentConfig configures a parent.
type ParentConfig struct {
	// MaxDims caps the dimensions one child may define (20,000): charts
	// past it are refused and their points counted as dropped.
	MaxDims int
	// FutureSlack is how far ahead of the parent's clock a point may be
	// (10s); later points are dropped and counted.
	FutureSlack time.Duration
	// Tier0Retention is the 1-second history kept per child (10 minutes:
	// 2.4 KB a dimension; 100 children of 1,000 dimensions hold 240 MB);
	// Tier1Retention the per-minute history (the store default, 14 days).
	Tier0Retention, Tier1Retention time.Duration
	// StaleAfter is how long a connected child may send nothing before it
	// is listed stale (10s).
	StaleAfter time.Duration
	// IdleTimeout closes a stream that sent nothing for this long (2m).
	IdleTimeout time.Duration
	Log         *slog.Logger
	Now         func() time.Time
}

// Parent stores the points its children stream, one store per child, and
// answers the API for each (api.Fleet). Safe for concurrent use.
type Parent struct {
	cfg ParentConfig

	// The children's alert engines run until Close.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex // guards nodes
	nodes map[string]*child
}

var _ api.Fleet = (*Parent)(nil)

// child is one node; its store and API server live as long as the parent.
type child struct {
	key   string
	hello atomic.Pointer[messages.StreamHello]
	db    *store.DB
	eng   *health.Engine
	api   *api.Server // replaced (under Parent.mu) when the hello changes

	mu          sync.Mutex // guards the fields below
	cancel      context.CancelFunc
	gen         uint64
	connected   bool
	since       int64
	connectedAt int64
	lastSeen    int64
	dims        map[string]int // dimensions per chart

	dropped atomic.Int64
	batches atomic.Int64
}

// NewParent makes an empty parent.
func NewParent(cfg ParentConfig) *Parent {
	if cfg.MaxDims <= 0 {
		cfg.MaxDims = 20000
	}
	if cfg.FutureSlack <= 0 {
		cfg.FutureSlack = 10 * time.Second
	}
	if cfg.Tier0Retention == 0 {
		cfg.Tier0Retention = 10 * time.Minute
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 2 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Parent{cfg: cfg, nodes: map[string]*child{}, ctx: ctx, cancel: cancel}
}

// Close stops the children's alert engines and closes their stores.
func (p *Parent) Close() {
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.nodes {
		c.mu.Lock()
		if c.cancel != nil {
			c.cancel()
		}
		c.mu.Unlock()
		_ = c.db.Close()
	}
}

// node returns the child of peer key, creating it. A node is its key: a
// child can only ever write to its own node, whatever its hello says.
func (p *Parent) node(key string, h *messages.StreamHello) (*child, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.nodes[key]; c != nil {
		if !reflect.DeepEqual(c.hello.Load(), h) {
			// A child that reconnects as a new version, or with other
			// options, is shown as it is now.
			srv, err := p.childAPI(key, h, c.db, c.eng)
			if err != nil {
				return nil, err
			}
			c.api = srv
		}
		c.hello.Store(h)
		return c, nil
	}
	// One-hour tier-1 chunks: the open chunk of 100,000 children's
	// dimensions costs 84 MB instead of 504 MB with the default 6 hours.
	db, err := store.Open(store.Config{Tier0Retention: p.cfg.Tier0Retention, Tier1Retention: p.cfg.Tier1Retention, Tier1ChunkMinutes: 60})
	if err != nil {
		return nil, err
	}
	// Each child's alerts are evaluated here over its streamed points,
	// with the built-in rules, as on the child itself (kept in memory: a
	// restarted parent starts them again as the children come back).
	eng, err := health.New(db, "")
	if err != nil {
		db.Close()
		return nil, err
	}
	srv, err := p.childAPI(key, h, db, eng)
	if err != nil {
		db.Close()
		return nil, err
	}
	p.wg.Add(1)
	go func() { defer p.wg.Done(); eng.Run(p.ctx) }()
	c := &child{key: key, db: db, eng: eng, api: srv, dims: map[string]int{}}
	c.hello.Store(h)
	p.nodes[key] = c
	return c, nil
}

// Children lists the children, sorted by hostname then key.
func (p *Parent) Children() []api.FleetNode {
	p.mu.Lock()
	list := make([]*child, 0, len(p.nodes))
	for _, c := range p.nodes {
		list = append(list, c)
	}
	p.mu.Unlock()
	now := p.cfg.Now().Unix()
	out := make([]api.FleetNode, 0, len(list))
	for _, c := range list {
		h := c.hello.Load()
		st := c.db.Stats()
		n := api.FleetNode{
			GUID: h.GUID, NodeID: h.NodeID, Hostname: h.Hostname, PublicKey: c.key,
			Version: h.Version, OS: h.OS, Arch: h.Arch,
			FirstEntry: st.FirstTime, LastEntry: st.LastTime, Charts: st.Charts, Dimensions: st.Dimensions,
			Dropped: c.dropped.Load(), Batches: c.batches.Load(),
		}
		c.mu.Lock()
		n.ConnectedAt, n.LastSeen = c.connectedAt, c.lastSeen
		switch {
		case !c.connected:
			n.State, n.Since = api.ChildDisconnected, c.since
		case now-c.lastSeen > int64(p.cfg.StaleAfter/time.Second):
			n.State, n.Since = api.ChildStale, c.lastSeen
		default:
			n.State, n.Since = api.ChildLive, c.connectedAt
		}
		c.mu.Unlock()
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Hostname != out[j].Hostname {
			return out[i].Hostname < out[j].Hostname
		}
		return out[i].PublicKey < out[j].PublicKey
	})
	return out
}

// Handler answers API requests for the child named by GUID, node id,
// hostname or key.
func (p *Parent) Handler(name string) (fasthttp.RequestHandler, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.lookup(name); c != nil {
		return c.api.Handle, true
	}
	return nil, false
}

// lookup returns the child named by key, or else by the GUID, node id or
// hostname of its hello; nil when none is. A key is the child itself;
// the hello's names are the child's word, so a name that two children
// claim names neither, and a child naming itself by another's key cannot
// shadow it. p.mu is held.
func (p *Parent) lookup(name string) *child {
	if c := p.nodes[name]; c != nil {
		return c
	}
	var found *child
	for _, c := range p.nodes {
		h := c.hello.Load()
		if name == h.GUID || name == h.NodeID || name == h.Hostname {
			if found != nil {
				return nil
			}
			found = c
		}
	}
	return found
}

// ChildDB returns the store of the child named by GUID, node id, hostname
// or key: the API's v2 data queries read several nodes' stores at once.
func (p *Parent) ChildDB(name string) (*store.DB, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.lookup(name); c != nil {
		return c.db, true
	}
	return nil, false
}

// DB returns the store of the child with key (tests and benchmarks).
func (p *Parent) DB(key string) (*store.DB, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.nodes[key]
	if c == nil {
		return nil, false
	}
	return c.db, true
}

// errStream is a stream the parent refuses (the ack says why).
var errStream = errors.New("stream refused")

// ServeStream serves one child's stream (rpc.StreamHandler): it answers
// with the newest second held per chart, then stores batches and acks
// each. A newer stream from the same key replaces an older one.
func (p *Parent) ServeStream(ctx context.Context, peer string, h *messages.StreamHello, st transport.Stream) {
	defer st.Close()
	c, err := p.node(peer, h)
	if err != nil {
		_ = messages.WriteFrame(st, &messages.AgentReply{Status: 500, Error: err.Error()}, messages.AgentMaxFrame)
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.mu.Lock()
	if c.cancel != nil {
		c.cancel()
	}
	c.cancel = cancel
	c.gen++
	gen := c.gen
	now := p.cfg.Now().Unix()
	c.connected, c.connectedAt, c.lastSeen, c.since = true, now, now, now
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.gen == gen {
			c.connected, c.since, c.cancel = false, p.cfg.Now().Unix(), nil
		}
		c.mu.Unlock()
	}()
	go func() {
		<-ctx.Done()
		st.Abort() // replaced by a newer stream, or the agent stops
	}()

	// The resume fits one frame: a chart left out is sent again from the
	// child's ring, and the seconds the parent holds of it are skipped.
	resume := map[string]int64{}
	room := messages.AgentMaxFrame - 1024 // the reply around the map
	for _, def := range c.db.Charts() {
		if t, _, ok := c.db.Latest(def.ID); ok {
			room -= len(def.ID) + 18 // CBOR: two heads of at most 9 bytes
			if room < 0 {
				break
			}
			resume[def.ID] = t
		}
	}
	if err := messages.WriteFrame(st, &messages.AgentReply{Status: 200, Resume: resume}, messages.AgentMaxFrame); err != nil {
		return
	}
	p.cfg.Log.Info("child streaming", "peer", peer, "hostname", h.Hostname)
	var seq uint64
	// refused holds the charts of this stream whose latest definition
	// was refused: the parent may hold an older one, which their points
	// no longer fit.
	refused := map[string]bool{}
	for {
		_ = st.SetReadDeadline(time.Now().Add(p.cfg.IdleTimeout))
		var b messages.StreamBatch
		if err := messages.ReadFrame(st, &b, messages.AgentMaxFrame); err != nil {
			if ctx.Err() == nil {
				p.cfg.Log.Info("child stream ended", "peer", peer, "err", err)
			}
			return
		}
		ack := messages.StreamAck{Seq: b.Seq}
		if b.Seq != seq+1 {
			ack.Error = fmt.Sprintf("batch %d after %d: out of order", b.Seq, seq)
		} else {
			seq = b.Seq
			dropped, err := p.apply(c, &b, refused)
			ack.Dropped = dropped
			if err != nil {
				ack.Error = err.Error()
			}
		}
		_ = st.SetWriteDeadline(time.Now().Add(p.cfg.IdleTimeout))
		if err := messages.WriteFrame(st, &ack, messages.AgentMaxFrame); err != nil || ack.Error != "" {
			if ack.Error != "" {
				p.cfg.Log.Warn("child stream refused", "peer", peer, "err", ack.Error)
			}
			return
		}
	}
}

// apply stores one batch. Charts over the dimension cap or with a string
// longer than maxChartText, with their points in this batch and later
// ones of the stream (refused), and points from the future, are dropped
// and counted; a malformed chart or point set is an error that ends the
// stream.
func (p *Parent) apply(c *child, b *messages.StreamBatch, refused map[string]bool) (int, error) {
	dropped := 0
	c.mu.Lock()
	total := 0
	for _, n := range c.dims {
		total += n
	}
	c.mu.Unlock()
	for i := range b.Charts {
		sc := &b.Charts[i]
		if len(sc.DimNames) != 0 && len(sc.DimNames) != len(sc.Dims) {
			return dropped, fmt.Errorf("%w: chart %q: %d names for %d dimensions", errStream, sc.ID, len(sc.DimNames), len(sc.Dims))
		}
		c.mu.Lock()
		old := c.dims[sc.ID]
		c.mu.Unlock()
		if total-old+len(sc.Dims) > p.cfg.MaxDims || longText(sc) {
			refused[sc.ID] = true
			dropped++
			continue
		}
		def := &store.ChartDef{
			ID: sc.ID, Context: sc.Context, Family: sc.Family, Title: sc.Title, Units: sc.Units,
			ChartType: sc.ChartType, Priority: sc.Priority, Plugin: "stream", Module: "child",
		}
		for j, d := range sc.Dims {
			dd := store.DimDef{ID: d}
			if len(sc.DimNames) > 0 {
				dd.Name = sc.DimNames[j]
			}
			def.Dims = append(def.Dims, dd)
		}
		if err := c.db.Register(def); err != nil {
			return dropped, fmt.Errorf("%w: %v", errStream, err)
		}
		delete(refused, sc.ID)
		total += len(sc.Dims) - old
		c.mu.Lock()
		c.dims[sc.ID] = len(sc.Dims)
		c.mu.Unlock()
	}
	limit := p.cfg.Now().Add(p.cfg.FutureSlack).Unix()
	for i := range b.Points {
		pt := &b.Points[i]
		if refused[pt.Chart] {
			dropped += len(pt.Values)
			continue
		}
		for k, row := range pt.Values {
			t := pt.Start + int64(k)
			if t > limit {
				dropped += len(pt.Values) - k
				break
			}
			err := c.db.Append(pt.Chart, t, row)
			switch {
			case err == nil, errors.Is(err, store.ErrOld):
				// ErrOld: a second already stored (a resumed stream overlaps).
			case errors.Is(err, store.ErrNotFound):
				dropped += len(pt.Values) - k
			default:
				return dropped, fmt.Errorf("%w: %v", errStream, err)
			}
			if errors.Is(err, store.ErrNotFound) {
				break
			}
		}
	}
	c.dropped.Add(int64(dropped))
	c.batches.Add(1)
	c.mu.Lock()
	c.lastSeen = p.cfg.Now().Unix()
	c.mu.Unlock()
	return dropped, nil
}

// maxChartText bounds each string of a child's chart (ids, context,
// family, title, units, type, dimension ids and names), so the dimension
// cap bounds the metadata a child can make its parent hold.
const maxChartText = 1000

// longText reports whether a string of sc is longer than maxChartText.
func longText(sc *messages.StreamChart) bool {
	for _, f := range [][]string{{sc.ID, sc.Context, sc.Family, sc.Title, sc.Units, sc.ChartType}, sc.Dims, sc.DimNames} {
		for _, v := range f {
			if len(v) > maxChartText {
				return true
			}
		}
	}
	return false
}

// NodeStore is one child's store with its hostname (the child's word)
// and its key.
type NodeStore struct {
	Hostname, Key string
	DB            *store.DB
}

// Stores lists every child's store (remote-write exports them).
func (p *Parent) Stores() []NodeStore {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]NodeStore, 0, len(p.nodes))
	for _, c := range p.nodes {
		out = append(out, NodeStore{Hostname: c.hello.Load().Hostname, Key: c.key, DB: c.db})
	}
	return out
}

// childAPI is the API server that answers for the child of key, with the
// identity, machine and options of its hello.
func (p *Parent) childAPI(key string, h *messages.StreamHello, db *store.DB, eng *health.Engine) (*api.Server, error) {
	return api.New(api.Options{DB: db, Health: eng, Log: p.cfg.Log, Remote: &api.RemoteHost{
		Hostname: h.Hostname, GUID: h.GUID, NodeID: h.NodeID, PublicKey: key, OS: h.OS, Arch: h.Arch,
		Version: h.Version, System: h.System, Settings: h.Settings,
	}})
}
