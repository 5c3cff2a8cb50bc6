package rpc_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/api"
	"peerdns/agent/logs"
	"peerdns/agent/rpc"
	"peerdns/agent/store"
	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// testAgent is a store with one chart of known points, the REST API and
// the RPC server on 127.0.0.1:0.
type testAgent struct {
	dir string
	db  *store.DB
	srv *rpc.Server
	api *api.Server
	now int64
}

func newTestAgent(t *testing.T) *testAgent {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(store.Config{Dir: dir, Tier0Retention: time.Hour, Tier1Retention: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, id := range []string{"system.cpu", "system.load"} {
		if err := db.Register(&store.ChartDef{ID: id, Units: "x", Dims: []store.DimDef{{ID: "a"}, {ID: "b"}}}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().Unix()
	for ts := now - 600; ts <= now; ts++ {
		for _, id := range []string{"system.cpu", "system.load"} {
			if err := db.Append(id, ts, []float64{float64(ts % 100), 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	id, err := identity.LoadOrCreate(dir + "/identity.key")
	if err != nil {
		t.Fatal(err)
	}
	a := &testAgent{dir: dir, db: db, now: now}
	audit, err := logs.OpenAudit(filepath.Join(dir, "audit.log"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { audit.Close() })
	srv, err := rpc.Listen(rpc.Config{
		Identity: id, ListenAddr: "127.0.0.1:0", Dir: dir, DB: db, Audit: audit,
		API: func(c *fasthttp.RequestCtx) { a.api.Handle(c) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	a.srv = srv
	a.api, err = api.New(api.Options{DB: db, Identity: id, Peer: srv, Audit: audit, DataDir: dir, ExportDir: filepath.Join(dir, "exports")})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// operator is a client identity with its own endpoint.
type operator struct {
	id *identity.Identity
	c  *rpc.Client
}

func newOperator(t *testing.T) *operator {
	t.Helper()
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	c, err := rpc.NewClient(id, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &operator{id: id, c: c}
}

func (o *operator) call(t *testing.T, a *testAgent, req *messages.AgentRequest) (*messages.AgentReply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := o.c.Call(ctx, a.srv.ID(), a.srv.Addr().String(), req)
	if err != nil && !errors.Is(err, rpc.ErrStatus) {
		t.Fatalf("call %s: %v", req.Method, err)
	}
	return rep, err
}

func mustReq(t *testing.T, method string, args ...string) *messages.AgentRequest {
	t.Helper()
	r, err := rpc.BuildRequest(method, args)
	if err != nil {
		t.Fatalf("BuildRequest(%s %v): %v", method, args, err)
	}
	return r
}

// TestRoles calls every method as admin, viewer and an unknown key.
func TestRoles(t *testing.T) {
	a := newTestAgent(t)
	admin, viewer, stranger := newOperator(t), newOperator(t), newOperator(t)
	if err := rpc.Allow(a.dir, admin.id.ID(), "admin"); err != nil {
		t.Fatal(err)
	}
	if err := rpc.Allow(a.dir, viewer.id.ID(), "viewer"); err != nil {
		t.Fatal(err)
	}
	before := fmt.Sprint(a.now - 3000) // prunes nothing that is held
	methods := []struct {
		name       string
		method     string
		args       []string
		viewerOK   bool
		adminState int // expected admin status
	}{
		{"info", "info", nil, true, 200},
		{"rest tunnel", "get", []string{"/api/v3/info"}, true, 200},
		{"rest tunnel 404", "get", []string{"/api/v3/nope"}, true, 404},
		{"rest tunnel export write", "get", []string{"/api/v3/export?format=json&write=1"}, false, 200},
		// The role checks judge the path the REST handler runs: percent
		// escapes, dot segments and an escaped slash name the same command.
		{"rest tunnel logs audit", "get", []string{"/api/v3/logs?source=audit"}, false, 200},
		{"rest tunnel logs escaped", "get", []string{"/api/v3/%6cogs?source=audit"}, false, 200},
		{"rest tunnel logs dot segment", "get", []string{"/api/v3/logs/./?source=audit"}, false, 200},
		{"rest tunnel logs escaped slash", "get", []string{"/api/v3/logs%2F?source=audit"}, false, 200},
		{"rest tunnel logs two sources", "get", []string{"/api/v3/logs?source=anomaly&source=audit"}, false, -1},
		{"rest tunnel logs anomaly", "get", []string{"/api/v3/logs?source=anomaly"}, true, 503},
		{"rest tunnel export write escaped", "get", []string{"/api/v3/%65xport?format=json&write=1"}, false, 200},
		// /host/<this host>/ runs the command after it, as the REST API
		// answers Netdata's host switch.
		{"rest tunnel logs by host", "get", []string{"/api/../host/" + api.Hostname() + "/api/v3/logs?source=audit"}, false, 200},
		{"rest tunnel logs by host escaped", "get", []string{"/api/%2E%2E/%68ost/" + api.Hostname() + "/api/v3/%6cogs?source=audit"}, false, 200},
		{"rest tunnel processes by host", "get", []string{"/api/../host/" + api.Hostname() + "/api/v3/processes?limit=2"}, false, 200},
		{"rest tunnel export write by host", "get", []string{"/api/../host/" + api.Hostname() + "/api/v3/export?format=json&write=1"}, false, 200},
		// The process table's command lines are functions.run's, an admin's.
		{"rest tunnel processes", "get", []string{"/api/v3/processes?limit=2"}, false, 200},
		{"rest tunnel processes escaped", "get", []string{"/api/v3/%70rocesses?limit=2"}, false, 200},
		{"functions.list", "functions.list", nil, true, 200},
		{"functions.run processes", "functions.run", []string{"processes", "limit=5"}, false, 200},
		{"functions.run connections", "functions.run", []string{"network-connections"}, false, 200},
		{"functions.run unknown", "functions.run", []string{"nope"}, false, 404},
		{"retention.set", "retention.set", []string{"tier0=3600"}, false, 200},
		{"prune", "prune", []string{"before=" + before}, false, 200},
		{"logs audit", "logs", []string{"audit"}, false, 200},
		{"logs journal", "logs", []string{"journal"}, false, -1}, // 200, 404 or 5xx by host; never 403
		{"logs anomaly", "logs", []string{"anomaly"}, true, 503}, // this test agent runs no detector: the REST answer
	}
	for _, m := range methods {
		t.Run(m.name, func(t *testing.T) {
			rep, _ := admin.call(t, a, mustReq(t, m.method, m.args...))
			if m.adminState > 0 && rep.Status != m.adminState {
				t.Errorf("admin %s: status %d (%s), want %d", m.name, rep.Status, rep.Error, m.adminState)
			}
			if rep.Status == 403 {
				t.Errorf("admin %s: refused: %s", m.name, rep.Error)
			}
			rep, _ = viewer.call(t, a, mustReq(t, m.method, m.args...))
			if m.viewerOK && rep.Status == 403 {
				t.Errorf("viewer %s: refused: %s", m.name, rep.Error)
			}
			if !m.viewerOK && rep.Status != 403 {
				t.Errorf("viewer %s: status %d, want 403", m.name, rep.Status)
			}
			rep, err := stranger.call(t, a, mustReq(t, m.method, m.args...))
			if err == nil || rep.Status != 403 || !strings.Contains(rep.Error, "unknown key") {
				t.Errorf("unknown key %s: %v %+v, want 403 unknown key", m.name, err, rep)
			}
		})
	}
	// stream: only a parent takes it (this agent is not: 404 for the
	// admin), viewers are refused, unknown keys too.
	stream := func() *messages.AgentRequest {
		r := rpc.NewRequest("stream")
		r.Stream = &messages.StreamHello{Hostname: "h", GUID: "g", NodeID: "n"}
		return r
	}
	if rep, _ := admin.call(t, a, stream()); rep.Status != 404 {
		t.Errorf("admin stream to a non-parent: %d %s, want 404", rep.Status, rep.Error)
	}
	if rep, _ := viewer.call(t, a, stream()); rep.Status != 403 {
		t.Errorf("viewer stream: %d, want 403", rep.Status)
	}
	if rep, _ := stranger.call(t, a, stream()); rep.Status != 403 {
		t.Errorf("unknown key stream: %d, want 403", rep.Status)
	}
	calls := len(methods) + 1
	if n := a.srv.C.UnknownKey.Load(); n != int64(calls) {
		t.Errorf("unknown-key counter %d, want %d", n, calls)
	}
	forbidden := int64(1) // the viewer's stream
	for _, m := range methods {
		if !m.viewerOK {
			forbidden++
		}
	}
	if n := a.srv.C.Forbidden.Load(); n != forbidden {
		t.Errorf("forbidden counter %d, want %d", n, forbidden)
	}
	// Every call is in the audit trail (the agent's, agent/logs): who,
	// what, result, in memory and in the file.
	entries, _ := a.srv.Audit().Before(0, 1000, func(e *logs.Entry) bool { return e.Unit == "rpc" })
	if len(entries) != 3*calls {
		t.Errorf("audit has %d rpc entries, want %d", len(entries), 3*calls)
	}
	raw, err := os.ReadFile(a.srv.Audit().Path())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), `"unit":"rpc"`); n != 3*calls {
		t.Errorf("%s has %d rpc lines, want %d", a.srv.Audit().Path(), n, 3*calls)
	}
	var sawViewerDenied bool
	for _, e := range entries {
		f := e.Fields
		if f["peer"] == viewer.id.ID() && f["method"] == "prune" && f["status"] == "403" && f["role"] == "viewer" {
			sawViewerDenied = true
		}
	}
	if !sawViewerDenied {
		t.Error("audit misses the viewer's refused prune")
	}
	// A deny takes effect at the next call, on the same agent.
	if err := rpc.Deny(a.dir, viewer.id.ID()); err != nil {
		t.Fatal(err)
	}
	if rep, _ := viewer.call(t, a, mustReq(t, "info")); rep.Status != 403 {
		t.Errorf("denied viewer: status %d, want 403", rep.Status)
	}
}

func TestReplayAndMalformed(t *testing.T) {
	a := newTestAgent(t)
	admin := newOperator(t)
	if err := rpc.Allow(a.dir, admin.id.ID(), "admin"); err != nil {
		t.Fatal(err)
	}
	req := mustReq(t, "info")
	if rep, err := admin.call(t, a, req); err != nil {
		t.Fatalf("first call: %v %+v", err, rep)
	}
	rep, _ := admin.call(t, a, req)
	if rep.Status != 409 || !strings.Contains(rep.Error, "replayed") {
		t.Errorf("replayed request: %d %s, want 409 replayed", rep.Status, rep.Error)
	}
	old := mustReq(t, "info")
	old.TimeUnixNano = time.Now().Add(-2 * rpc.ReplayWindow).UnixNano()
	if rep, _ := admin.call(t, a, old); rep.Status != 409 {
		t.Errorf("stale request: %d, want 409", rep.Status)
	}
	bad := mustReq(t, "info")
	bad.Method = "shutdown"
	if rep, _ := admin.call(t, a, bad); rep.Status != 400 {
		t.Errorf("unknown method: %d, want 400", rep.Status)
	}
	// A frame declaring more than the limit is refused before it is read;
	// so is one that is not CBOR.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := admin.c.Dial(ctx, a.srv.ID(), a.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, raw := range [][]byte{{0x7f, 0xff, 0xff, 0xff}, {0, 0, 0, 3, 0xff, 0xfe, 0xfd}} {
		st, err := conn.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write(raw); err != nil {
			t.Fatal(err)
		}
		var rep messages.AgentReply
		if err := messages.ReadFrame(st, &rep, messages.AgentMaxFrame); err != nil || rep.Status != 400 {
			t.Errorf("frame % x: %v %+v, want 400", raw, err, rep)
		}
		st.Close()
	}
	if a.srv.C.Replayed.Load() != 2 || a.srv.C.Malformed.Load() != 3 {
		t.Errorf("counters replayed %d malformed %d, want 2 and 3", a.srv.C.Replayed.Load(), a.srv.C.Malformed.Load())
	}
}

func getJSON(t *testing.T, o *operator, a *testAgent, path string, v any) {
	t.Helper()
	rep, err := o.call(t, a, mustReq(t, "get", path))
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}
	if err := json.Unmarshal(rep.Body, v); err != nil {
		t.Fatalf("get %s: %v: %s", path, err, rep.Body)
	}
}

// TestPruneAndRetentionVisible checks the admin methods' effects through
// the read API (over the same RPC).
func TestPruneAndRetentionVisible(t *testing.T) {
	a := newTestAgent(t)
	admin := newOperator(t)
	if err := rpc.Allow(a.dir, admin.id.ID(), "admin"); err != nil {
		t.Fatal(err)
	}
	// oldest is the earliest second of a chart with a value, read through
	// the REST tunnel (format=json rows: [time, a, b], null for a gap).
	oldest := func(chart string) int64 {
		var d struct {
			Data [][]any `json:"data"`
		}
		getJSON(t, admin, a, "/api/v1/data?chart="+chart+"&after=-700&points=700&group=average&format=json", &d)
		first := int64(0)
		for _, row := range d.Data {
			if len(row) > 1 && row[1] != nil {
				ts := int64(row[0].(float64))
				if first == 0 || ts < first {
					first = ts
				}
			}
		}
		return first
	}
	if o := oldest("system.cpu"); o == 0 || o > a.now-590 {
		t.Fatalf("before prune: oldest point %d, want about %d", o, a.now-600)
	}
	cut := a.now - 100
	if _, err := admin.call(t, a, mustReq(t, "prune", "chart=system.cpu", fmt.Sprintf("before=%d", cut))); err != nil {
		t.Fatal(err)
	}
	if o := oldest("system.cpu"); o < cut {
		t.Errorf("after prune: oldest point %d, want >= %d", o, cut)
	}
	if o := oldest("system.load"); o == 0 || o > a.now-590 {
		t.Errorf("prune of system.cpu touched system.load: oldest %d", o)
	}
	if rep, _ := admin.call(t, a, mustReq(t, "prune", "chart=nope", "before=10")); rep.Status != 404 {
		t.Errorf("prune unknown chart: %d, want 404", rep.Status)
	}

	if _, err := admin.call(t, a, mustReq(t, "retention.set", "tier0=120", "tier1=7200")); err != nil {
		t.Fatal(err)
	}
	if o := oldest("system.load"); o < a.now-120 {
		t.Errorf("after retention 120s: oldest %d, want >= %d", o, a.now-120)
	}
	// settings caches the store's stats for up to a second.
	testutil.Eventually(t, 5*time.Second, func() error {
		var settings struct {
			Retention struct {
				Tier0 struct {
					Seconds int64 `json:"seconds"`
				} `json:"tier0"`
				Tier1 struct {
					Seconds int64 `json:"seconds"`
				} `json:"tier1"`
			} `json:"retention"`
		}
		getJSON(t, admin, a, "/api/v3/settings", &settings)
		if settings.Retention.Tier0.Seconds != 120 || settings.Retention.Tier1.Seconds != 7200 {
			return fmt.Errorf("settings retention = %+v, want 120 and 7200", settings.Retention)
		}
		return nil
	})
	if rep, _ := admin.call(t, a, mustReq(t, "retention.set", "tier0=0", "tier1=1")); rep.Status != 400 {
		t.Errorf("tier1=1s: %d, want 400", rep.Status)
	}
	// Past what a duration holds in nanoseconds (which wrapped to a short
	// retention that dropped the history), or past a day of tier 0
	// (rings sized at once: memory without bound), is refused and changes
	// nothing.
	for _, args := range [][]string{{"tier0=9300000000000", "tier1=0"}, {"tier0=18446744073", "tier1=0"}, {"tier0=86401", "tier1=0"}, {"tier0=0", "tier1=9300000000000"}} {
		if rep, _ := admin.call(t, a, mustReq(t, "retention.set", args...)); rep.Status != 400 {
			t.Errorf("retention.set %v: %d, want 400", args, rep.Status)
		}
	}
	if o := oldest("system.load"); o == 0 || o > a.now-110 {
		t.Errorf("after refused retentions: oldest %d, want about %d", o, a.now-120)
	}

	// /api/v1/functions lists the job names; /api/v3/tunnel the listening state.
	var fns struct {
		Functions map[string]any `json:"functions"`
	}
	getJSON(t, admin, a, "/api/v1/functions", &fns)
	if _, ok := fns.Functions["processes"]; !ok || fns.Functions["network-connections"] == nil {
		t.Errorf("functions = %v, want processes and network-connections", fns.Functions)
	}
	var tun struct {
		Status    string         `json:"status"`
		PublicKey string         `json:"public_key"`
		RPC       map[string]any `json:"rpc"`
	}
	var db struct {
		PublicKey string         `json:"public_key"`
		PeerRPC   map[string]any `json:"peer_rpc"`
	}
	getJSON(t, admin, a, "/api/v3/db", &db)
	if db.PublicKey != a.srv.ID() || db.PeerRPC["listening"] != true || db.PeerRPC["address"] != a.srv.Addr().String() {
		t.Errorf("db = %+v, want the key and the listening RPC", db)
	}
	getJSON(t, admin, a, "/api/v3/tunnel", &tun)
	if tun.Status != "listening" || tun.PublicKey != a.srv.ID() || tun.RPC["address"] != a.srv.Addr().String() {
		t.Errorf("tunnel = %+v", tun)
	}
}

func FuzzAgentRequest(f *testing.F) {
	for _, m := range []string{"info", "api.get", "prune", "retention.set", "logs", "functions.run", "stream"} {
		r := rpc.NewRequest(m)
		r.Path = "/api/v3/info"
		b, _ := messages.Marshal(r)
		f.Add(b)
	}
	f.Add([]byte{0xa1, 0x01, 0x61, 0x78})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r messages.AgentRequest
		if err := messages.Unmarshal(b, &r); err != nil {
			return
		}
		_ = r.Validate()
		var b2 messages.StreamBatch
		_ = messages.Unmarshal(b, &b2)
	})
}

// TestFrameLengthIsNotTrusted: a call's frame declares its length before
// its bytes; memory is taken as the bytes arrive, so a peer of the least
// role that declares the largest frame and sends a few bytes costs the
// agent those bytes, not the declared megabyte (1,024 such streams per
// connection would hold a gigabyte for the call timeout).
func TestFrameLengthIsNotTrusted(t *testing.T) {
	a := newTestAgent(t)
	child := newOperator(t)
	if err := rpc.Allow(a.dir, child.id.ID(), "child"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := child.c.Dial(ctx, a.srv.ID(), a.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lie := func() {
		st, err := conn.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		raw := binary.BigEndian.AppendUint32(nil, messages.AgentMaxFrame)
		if _, err := st.Write(append(raw, "12345678"...)); err != nil {
			t.Fatal(err)
		}
		_ = st.CloseWrite()
		var rep messages.AgentReply
		if err := messages.ReadFrame(st, &rep, messages.AgentMaxFrame); err != nil || rep.Status != 400 {
			t.Fatalf("truncated frame: %v %+v, want 400", err, rep)
		}
	}
	lie() // the connection's own buffers
	const calls = 32
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		lie()
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > calls*messages.AgentMaxFrame/4 {
		t.Errorf("%d truncated frames declaring %d bytes allocated %d bytes: the declared length was allocated", calls, messages.AgentMaxFrame, got)
	}
}

// TestUnknownKeyRefusedWithinGrace: a key not in the allowlist is never
// admitted, so its connection holds one of the endpoint's few places for
// connections not admitted yet; its one call must be read within the
// grace the refusal gives (5s), not the call timeout, or keys anyone can
// make would hold every place by starting a frame and never finishing it.
func TestUnknownKeyRefusedWithinGrace(t *testing.T) {
	a := newTestAgent(t)
	stranger := newOperator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := stranger.c.Dial(ctx, a.srv.ID(), a.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := conn.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Now()
	if _, err := st.Write([]byte{0, 0}); err != nil { // half a length, then nothing
		t.Fatal(err)
	}
	_ = st.SetDeadline(start.Add(15 * time.Second))
	var rep messages.AgentReply
	if err := messages.ReadFrame(st, &rep, messages.AgentMaxFrame); err != nil || rep.Status != 403 {
		t.Fatalf("stalled frame of an unknown key after %v: %v %+v, want 403", time.Since(start).Round(time.Second), err, rep)
	}
	if n := a.srv.C.UnknownKey.Load(); n != 1 {
		t.Errorf("unknown-key counter %d, want 1", n)
	}
}
