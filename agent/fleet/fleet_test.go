package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/api"
	"peerdns/agent/fleet"
	"peerdns/agent/rpc"
	"peerdns/agent/store"
	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport/identity"
)

type parentEnv struct {
	dir    string
	parent *fleet.Parent
	rpc    *rpc.Server
	url    string
}

// newParent starts a parent: its own store, the RPC server with the
// parent as stream handler and the REST API on 127.0.0.1:0. opts change
// the API's Options before it starts.
func newParent(t *testing.T, cfg fleet.ParentConfig, opts ...func(*api.Options)) *parentEnv {
	t.Helper()
	p := fleet.NewParent(cfg)
	t.Cleanup(p.Close)
	var srv *api.Server
	dir, db, id, rs := listenRPC(t, p, func(c *fasthttp.RequestCtx) { srv.Handle(c) })
	o := api.Options{DB: db, Identity: id, Parent: true, Fleet: p, Peer: rs}
	for _, f := range opts {
		f(&o)
	}
	srv, err := api.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return &parentEnv{dir: dir, parent: p, rpc: rs, url: "http://" + ln.Addr().String()}
}

// listenRPC starts an RPC server on 127.0.0.1:0 with a store, an
// identity and a folder of its own, stream serving children and api the
// REST calls.
func listenRPC(t *testing.T, stream rpc.StreamHandler, api fasthttp.RequestHandler) (dir string, db *store.DB, id *identity.Identity, rs *rpc.Server) {
	t.Helper()
	dir = t.TempDir()
	db, err := store.Open(store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if id, err = identity.Generate(); err != nil {
		t.Fatal(err)
	}
	rs, err = rpc.Listen(rpc.Config{Identity: id, ListenAddr: "127.0.0.1:0", Dir: dir, DB: db, Stream: stream, API: api})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return dir, db, id, rs
}

type childEnv struct {
	id   *identity.Identity
	db   *store.DB
	ep   *rpc.Client
	name string
	now  int64
}

func newChild(t *testing.T, p *parentEnv, name string, dims int) *childEnv {
	t.Helper()
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := rpc.Allow(p.dir, id.ID(), "child"); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	def := &store.ChartDef{ID: "system.cpu", Units: "%"}
	for d := 0; d < dims; d++ {
		def.Dims = append(def.Dims, store.DimDef{ID: fmt.Sprintf("d%d", d)})
	}
	if err := db.Register(def); err != nil {
		t.Fatal(err)
	}
	c, err := rpc.NewClient(id, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ce := &childEnv{id: id, db: db, ep: c, name: name, now: time.Now().Unix() - 300}
	ce.fill(t, time.Now().Unix()-5)
	return ce
}

// fill appends points up to second to, each value = second*10 + dim.
func (c *childEnv) fill(t *testing.T, to int64) {
	t.Helper()
	def, _ := c.db.Chart("system.cpu")
	for ; c.now <= to; c.now++ {
		row := make([]float64, len(def.Dims))
		for d := range row {
			row[d] = float64(c.now%1000*10 + int64(d))
		}
		if err := c.db.Append("system.cpu", c.now, row); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *childEnv) run(t *testing.T, p *parentEnv) (stop func()) {
	return c.runWith(t, p, messages.StreamHello{Hostname: c.name, GUID: "guid-" + c.name, NodeID: "node-" + c.name})
}

// runWith streams the child to p with hello h.
func (c *childEnv) runWith(t *testing.T, p *parentEnv, h messages.StreamHello) (stop func()) {
	ch := fleet.NewChild(fleet.ChildConfig{
		DB: c.db, Endpoint: c.ep.Endpoint(), ParentKey: p.rpc.ID(), ParentAddr: p.rpc.Addr().String(),
		Hello:    h,
		Interval: 50 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ch.Run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// held checks the parent holds every second [from, to] of a child.
func held(p *parentEnv, key string, from, to int64) error {
	db, ok := p.parent.DB(key)
	if !ok {
		return fmt.Errorf("no node for %.8s", key)
	}
	w, err := db.Query("system.cpu", 0, from, to)
	if err != nil {
		return err
	}
	if w.Start != from || len(w.Slots[0]) != int(to-from+1) {
		return fmt.Errorf("parent holds [%d, +%d), want [%d, %d]", w.Start, len(w.Slots[0]), from, to)
	}
	for k, s := range w.Slots[1] {
		if s.Count == 0 {
			return fmt.Errorf("gap at %d", from+int64(k))
		}
		if want := float64((from+int64(k))%1000*10 + 1); s.Sum != want {
			return fmt.Errorf("value at %d = %v, want %v", from+int64(k), s.Sum, want)
		}
	}
	return nil
}

func TestParentTwoChildren(t *testing.T) {
	p := newParent(t, fleet.ParentConfig{})
	a, b := newChild(t, p, "alpha", 3), newChild(t, p, "beta", 2)
	a.run(t, p)
	b.run(t, p)
	// Each child's own clock: the two are made a moment apart, which may
	// cross a second.
	testutil.Eventually(t, 10*time.Second, func() error {
		if err := held(p, a.id.ID(), a.now-296, a.now-1); err != nil {
			return err
		}
		return held(p, b.id.ID(), b.now-296, b.now-1)
	})
	var nodes struct {
		Nodes []struct {
			Hostname string         `json:"nm"`
			Child    map[string]any `json:"child"`
		} `json:"nodes"`
	}
	getJSON(t, p.url+"/api/v2/nodes", &nodes)
	if len(nodes.Nodes) != 3 || nodes.Nodes[1].Hostname != "alpha" || nodes.Nodes[2].Hostname != "beta" {
		t.Fatalf("nodes = %+v, want self, alpha, beta", nodes.Nodes)
	}
	if nodes.Nodes[1].Child["state"] != "live" {
		t.Errorf("alpha state = %v, want live", nodes.Nodes[1].Child)
	}
	// data for each child, by the node filter.
	for _, c := range []*childEnv{a, b} {
		var d struct {
			Labels []string `json:"labels"`
			Data   [][]any  `json:"data"`
		}
		getJSON(t, p.url+"/api/v1/data?chart=system.cpu&after=-30&points=10&format=json&scope_nodes="+c.name, &d)
		if want := len(c.db.Charts()[0].Dims) + 1; len(d.Labels) != want || len(d.Data) == 0 {
			t.Errorf("%s data: labels %v rows %d, want %d labels", c.name, d.Labels, len(d.Data), want)
		}
	}
	// v3 data over both children at once: grouped by node, one column
	// per child (each child's dims summed: its value = second*10*dims +
	// the dims' indexes); nodes= narrows to one, scope_nodes with two
	// names is served, not refused.
	var j struct {
		View struct {
			Dimensions struct {
				IDs []string `json:"ids"`
			} `json:"dimensions"`
		} `json:"view"`
		Result struct {
			Data [][]json.RawMessage `json:"data"`
		} `json:"result"`
	}
	getJSON(t, p.url+"/api/v3/data?contexts=system.cpu&group_by=node&aggregation=sum&after=-20&points=20&scope_nodes=alpha|beta", &j)
	if ids := j.View.Dimensions.IDs; len(ids) != 2 || ids[0] != "guid-alpha" || ids[1] != "guid-beta" || len(j.Result.Data) == 0 {
		t.Fatalf("group_by=node over the children: ids %v, %d rows", ids, len(j.Result.Data))
	}
	for _, row := range j.Result.Data {
		var ts int64
		var pa, pb []float64
		if json.Unmarshal(row[0], &ts) != nil || json.Unmarshal(row[1], &pa) != nil || json.Unmarshal(row[2], &pb) != nil {
			t.Fatalf("row %s", row)
		}
		want := func(dims int) float64 { return float64(ts%1000*10*int64(dims) + int64(dims*(dims-1)/2)) }
		if pa[0] != want(len(a.db.Charts()[0].Dims)) || pb[0] != want(len(b.db.Charts()[0].Dims)) {
			t.Errorf("at %d: alpha %v beta %v, want %v and %v", ts, pa[0], pb[0], want(len(a.db.Charts()[0].Dims)), want(len(b.db.Charts()[0].Dims)))
		}
	}
	getJSON(t, p.url+"/api/v3/data?contexts=system.cpu&group_by=node&after=-20&points=5&nodes=beta", &j)
	if ids := j.View.Dimensions.IDs; len(ids) != 1 || ids[0] != "guid-beta" {
		t.Errorf("nodes=beta: ids %v", ids)
	}
	// Alerts for each child, by the node filter: the parent evaluates the
	// built-in rules over the child's points (system.cpu has two).
	for _, c := range []*childEnv{a, b} {
		testutil.Eventually(t, 10*time.Second, func() error {
			var al struct {
				Alarms map[string]struct {
					Chart string `json:"chart"`
				} `json:"alarms"`
			}
			getJSON(t, p.url+"/api/v1/alarms?all&scope_nodes="+c.name, &al)
			if _, ok := al.Alarms["system.cpu.10min_cpu_usage"]; !ok {
				return fmt.Errorf("%s alarms: %v", c.name, al.Alarms)
			}
			return nil
		})
	}
	var fl struct {
		States map[string]int `json:"states"`
	}
	getJSON(t, p.url+"/api/v3/fleet", &fl)
	if fl.States["live"] != 2 {
		t.Errorf("fleet states = %v, want 2 live", fl.States)
	}
	resp, err := http.Get(p.url + "/api/v1/data?chart=system.cpu&nodes=nobody")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown node: %d, want 404", resp.StatusCode)
	}
}

func TestChildReconnectsWithoutGaps(t *testing.T) {
	p := newParent(t, fleet.ParentConfig{})
	c := newChild(t, p, "gamma", 2)
	first := c.now - 296
	stop := c.run(t, p)
	testutil.Eventually(t, 10*time.Second, func() error { return held(p, c.id.ID(), first, c.now-1) })
	stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		if s := p.parent.Children()[0].State; s != api.ChildDisconnected {
			return fmt.Errorf("state %s, want disconnected", s)
		}
		return nil
	})
	// Points collected while disconnected reach the parent after reconnecting.
	c.fill(t, time.Now().Unix())
	c.run(t, p)
	testutil.Eventually(t, 10*time.Second, func() error { return held(p, c.id.ID(), first, c.now-1) })
}

func TestParentCaps(t *testing.T) {
	p := newParent(t, fleet.ParentConfig{MaxDims: 4})
	c := newChild(t, p, "wide", 5) // over the cap: refused, counted
	def := &store.ChartDef{ID: "future", Dims: []store.DimDef{{ID: "x"}}}
	if err := c.db.Register(def); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	for ts := now - 2; ts <= now+120; ts++ { // two minutes ahead of the clock
		if err := c.db.Append("future", ts, []float64{1}); err != nil {
			t.Fatal(err)
		}
	}
	c.run(t, p)
	testutil.Eventually(t, 10*time.Second, func() error {
		ch := p.parent.Children()
		if len(ch) != 1 || ch[0].Dropped < 100 {
			return fmt.Errorf("children %+v: want drops counted", ch)
		}
		return nil
	})
	db, _ := p.parent.DB(c.id.ID())
	if _, ok := db.Chart("system.cpu"); ok {
		t.Error("chart over the dimension cap was stored")
	}
	if last, _, _ := db.Latest("future"); last > time.Now().Unix()+10 {
		t.Errorf("parent stored a point at %d, %ds in the future", last, last-time.Now().Unix())
	}
}

// TestParentDropsPointsOfARefusedRedefinition: a chart the parent holds
// that the child redefines past the dimension cap is refused, and its
// points in later batches are dropped and counted like those of the
// batch that redefined it, without ending the stream.
func TestParentDropsPointsOfARefusedRedefinition(t *testing.T) {
	p := fleet.NewParent(fleet.ParentConfig{MaxDims: 4})
	defer p.Close()
	c, stop := streamTo(t, p, 5*time.Second)
	defer stop()
	now := time.Now().Unix()
	batches := []messages.StreamBatch{
		{Charts: []messages.StreamChart{{ID: "c", Dims: []string{"a", "b"}}},
			Points: []messages.StreamPoints{{Chart: "c", Start: now - 3, Values: [][]float64{{1, 2}}}}},
		{Charts: []messages.StreamChart{{ID: "c", Dims: []string{"a", "b", "c", "d", "e"}}},
			Points: []messages.StreamPoints{{Chart: "c", Start: now - 2, Values: [][]float64{{1, 2, 3, 4, 5}}}}},
		{Points: []messages.StreamPoints{{Chart: "c", Start: now - 1, Values: [][]float64{{1, 2, 3, 4, 5}}}}},
	}
	wantDropped := []int{0, 2, 1}
	for i := range batches {
		b := &batches[i]
		b.Seq = uint64(i + 1)
		if err := messages.WriteFrame(c, b, messages.AgentMaxFrame); err != nil {
			t.Fatal(err)
		}
		var ack messages.StreamAck
		if err := messages.ReadFrame(c, &ack, messages.AgentMaxFrame); err != nil {
			t.Fatalf("batch %d: %v", b.Seq, err)
		}
		if ack.Error != "" || ack.Dropped != wantDropped[i] {
			t.Fatalf("batch %d: ack %+v, want %d dropped and no error", b.Seq, ack, wantDropped[i])
		}
	}
	db, _ := p.DB("k")
	if last, _, _ := db.Latest("c"); last != now-3 {
		t.Errorf("parent's last point of c at %d, want %d", last, now-3)
	}
}

// TestParentResumesAChildWithManyCharts: a child whose charts' ids
// together pass the frame limit still gets the parent's reply to its
// hello when it comes back: the charts left out of the resume are sent
// again from the child's ring.
func TestParentResumesAChildWithManyCharts(t *testing.T) {
	p := fleet.NewParent(fleet.ParentConfig{})
	defer p.Close()
	c, stop := streamTo(t, p, 10*time.Second)
	now := time.Now().Unix()
	const charts, perBatch = 1200, 300
	for i := 0; i < charts/perBatch; i++ {
		b := messages.StreamBatch{Seq: uint64(i + 1)}
		for j := i * perBatch; j < (i+1)*perBatch; j++ {
			id := fmt.Sprintf("%04d.%s", j, strings.Repeat("x", 990))
			b.Charts = append(b.Charts, messages.StreamChart{ID: id, Dims: []string{"a"}})
			b.Points = append(b.Points, messages.StreamPoints{Chart: id, Start: now - 2, Values: [][]float64{{1}}})
		}
		if err := messages.WriteFrame(c, &b, messages.AgentMaxFrame); err != nil {
			t.Fatal(err)
		}
		var ack messages.StreamAck
		if err := messages.ReadFrame(c, &ack, messages.AgentMaxFrame); err != nil || ack.Error != "" || ack.Dropped != 0 {
			t.Fatalf("batch %d: %v %+v", b.Seq, err, ack)
		}
	}
	stop()
	// streamTo fails the test when the reply cannot be read.
	_, stop = streamTo(t, p, 10*time.Second)
	stop()
}

// TestChildGoesStale: a connected child that sends nothing new is listed
// stale once StaleAfter has passed, and live again with new points.
func TestChildGoesStale(t *testing.T) {
	p := newParent(t, fleet.ParentConfig{StaleAfter: time.Second})
	c := newChild(t, p, "delta", 1)
	c.run(t, p)
	state := func(want string) func() error {
		return func() error {
			ch := p.parent.Children()
			if len(ch) != 1 || ch[0].State != want {
				return fmt.Errorf("children %+v, want one %s", ch, want)
			}
			return nil
		}
	}
	testutil.Eventually(t, 10*time.Second, state(api.ChildStale))
	c.fill(t, time.Now().Unix())
	testutil.Eventually(t, 10*time.Second, state(api.ChildLive))
}

// TestChildResumesAfterItsRingMovedOn: a child away longer than its
// tier-0 ring (and than one batch's worth of seconds) resumes from the
// oldest second its ring still holds; the seconds the ring lost are
// counted in Gaps, and the chart is not left behind.
func TestChildResumesAfterItsRingMovedOn(t *testing.T) {
	p := newParent(t, fleet.ParentConfig{})
	c := newChild(t, p, "zeta", 2)
	db, err := store.Open(store.Config{Tier0Retention: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	def, _ := c.db.Chart("system.cpu")
	if err := db.Register(def); err != nil {
		t.Fatal(err)
	}
	c.db = db
	now := time.Now().Unix()
	c.now = now - 3000
	c.fill(t, now-2990)
	run := func() (*fleet.Child, func()) {
		ch := fleet.NewChild(fleet.ChildConfig{
			DB: c.db, Endpoint: c.ep.Endpoint(), ParentKey: p.rpc.ID(), ParentAddr: p.rpc.Addr().String(),
			Hello:    messages.StreamHello{Hostname: c.name, GUID: "guid-" + c.name, NodeID: "node-" + c.name},
			Interval: 50 * time.Millisecond, MaxValues: 20, // 10 seconds a batch
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); ch.Run(ctx) }()
		stop := func() { cancel(); <-done }
		t.Cleanup(stop)
		return ch, stop
	}
	_, stop := run()
	testutil.Eventually(t, 10*time.Second, func() error { return held(p, c.id.ID(), now-3000, now-2990) })
	stop()
	// Away for most of an hour: the ring holds only its last minute.
	c.now = now - 100
	c.fill(t, now)
	ch, _ := run()
	testutil.Eventually(t, 10*time.Second, func() error { return held(p, c.id.ID(), now-59, now) })
	if g := ch.Gaps.Load(); g != now-59-(now-2989) {
		t.Errorf("gaps = %d, want %d", g, now-59-(now-2989))
	}
}
