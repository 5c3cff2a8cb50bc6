package localdns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/miekg/dns"

	nodedns "peerdns/dns"
	"peerdns/dns/dnstest"
	"peerdns/internal/store"
	"peerdns/internal/testutil"
	"peerdns/internal/view"
	"peerdns/messages"
)

type node struct {
	sys    *actor.ActorSystem
	pid    *actor.PID
	db     *store.DB
	pub    *view.LocalPublished
	view   *view.Published
	srv    *nodedns.Server
	hints  atomic.Int64
	stopFn func()
}

func ask[R any](t *testing.T, n *node, msg any) R {
	t.Helper()
	res, err := n.sys.Root.RequestFuture(n.pid, msg, 5*time.Second).Result()
	if err != nil {
		t.Fatalf("ask %T: %v", msg, err)
	}
	r, ok := res.(R)
	if !ok {
		t.Fatalf("ask %T: reply %T", msg, res)
	}
	return r
}

// startNode runs the actor over the store file at path, with a real DNS
// server reading its snapshot and forwarding to up.
func startNode(t *testing.T, path string, up *dnstest.Upstream, v *view.Published, opts ...func(*Deps)) *node {
	t.Helper()
	db, err := store.Open(path, store.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{sys: actor.NewActorSystem(), db: db, pub: &view.LocalPublished{}, view: v}
	n.srv, err = nodedns.New(nodedns.Config{Addr: "127.0.0.1:0", UDPSockets: 1, Upstreams: []string{up.Addr}}, v, n.pub, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.srv.Start(); err != nil {
		t.Fatal(err)
	}
	sub := n.sys.EventStream.Subscribe(func(evt any) {
		if h, ok := evt.(*messages.Hint); ok && h.Type == messages.HintLocalDNS {
			n.hints.Add(1)
		}
	})
	deps := Deps{Store: db, Published: n.pub, View: v, PublicLookup: n.srv.PublicLookup, Log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&deps)
	}
	n.pid = n.sys.Root.Spawn(Props(deps))
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		n.sys.EventStream.Unsubscribe(sub)
		n.sys.Root.StopFuture(n.pid).Wait()
		n.sys.Shutdown()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n.srv.Shutdown(ctx)
		db.Close()
	}
	t.Cleanup(stop)
	n.stopFn = stop
	return n
}

func (n *node) dig(t *testing.T, name string, qtype uint16) []string {
	t.Helper()
	m, _, err := (&dns.Client{Timeout: 3 * time.Second}).Exchange(new(dns.Msg).SetQuestion(dns.Fqdn(name), qtype), n.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rr := range m.Answer {
		out = append(out, rr.String()[len(rr.Header().String()):])
	}
	return out
}

// wantConflicts waits until n's conflict list is exactly want.
func wantConflicts(t *testing.T, n *node, within time.Duration, want ...messages.DNSConflict) {
	t.Helper()
	testutil.Eventually(t, within, func() error {
		if got := ask[*messages.GetLocalDNSReply](t, n, &messages.GetLocalDNS{}).Conflicts; !reflect.DeepEqual(got, want) {
			return fmt.Errorf("conflicts %+v, want %+v", got, want)
		}
		return nil
	})
}

// debugLog is a logger at debug level writing into the returned buffer.
func debugLog() (*testutil.LogBuffer, *slog.Logger) {
	b := &testutil.LogBuffer{}
	return b, slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func rec(t *testing.T, js string) messages.LocalRecord {
	t.Helper()
	r, err := messages.ParseLocalRecord([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testView() *view.Published {
	v := &view.Published{}
	v.Store(&view.Snapshot{Version: 1, Domains: map[string]*view.Domain{
		"clash.p2p": {Name: "clash.p2p", Status: "resolved", IP: netip.MustParseAddr("10.77.0.6")},
		"site.p2p":  {Name: "site.p2p", Status: "resolved", IP: netip.MustParseAddr("10.77.0.5")},
		"tie.p2p":   {Name: "tie.p2p", Status: "tie"},
	}})
	return v
}

func TestRecordsLiveAndPersisted(t *testing.T) {
	up := dnstest.Start(t, map[string]string{"clash.p2p": "198.51.100.9", "tie.p2p": "198.51.100.10"})
	path := filepath.Join(t.TempDir(), "node.db")
	n := startNode(t, path, up, testView())

	for _, js := range []string{
		`{"name":"a.lan","type":"A","ttl":60,"data":"192.168.1.10"}`,
		`{"name":"mail.lan","type":"MX","ttl":60,"preference":10,"exchange":"a.lan"}`,
		`{"name":"b.lan","type":"A","ttl":60,"data":"192.168.1.11"}`,
	} {
		if r := ask[*messages.LocalDNSWriteReply](t, n, &messages.AddLocalRecord{Record: rec(t, js)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	// Live in DNS as soon as the write is acknowledged.
	if got := n.dig(t, "a.lan", dns.TypeA); !reflect.DeepEqual(got, []string{"192.168.1.10"}) {
		t.Fatalf("a.lan = %q", got)
	}
	if r := ask[*messages.LocalDNSWriteReply](t, n, &messages.UpdateLocalRecord{Index: 0, Record: rec(t, `{"name":"a.lan","type":"A","ttl":60,"data":"192.168.1.20"}`)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := n.dig(t, "a.lan", dns.TypeA); !reflect.DeepEqual(got, []string{"192.168.1.20"}) {
		t.Fatalf("after update a.lan = %q", got)
	}
	if r := ask[*messages.LocalDNSWriteReply](t, n, &messages.DeleteLocalRecord{Index: 2}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := n.dig(t, "b.lan", dns.TypeA); got != nil {
		t.Fatalf("deleted b.lan = %q", got)
	}
	for _, bad := range []any{&messages.UpdateLocalRecord{Index: 5, Record: rec(t, `{"name":"x.lan","type":"A","data":"192.0.2.1"}`)}, &messages.DeleteLocalRecord{Index: -1}, &messages.DeleteLocalRecord{Index: 2}} {
		if r := ask[*messages.LocalDNSWriteReply](t, n, bad); !errors.Is(r.Err, messages.ErrBadRecordIndex) {
			t.Fatalf("%+v: %v, want messages.ErrBadRecordIndex", bad, r.Err)
		}
	}
	if r := ask[*messages.LocalDNSWriteReply](t, n, &messages.AddLocalRecord{Record: rec(t, `{"name":"a.lan","type":"CNAME","data":"b.lan"}`)}); r.Err == nil {
		t.Fatal("CNAME beside A accepted")
	}
	if r := ask[*messages.LocalDNSWriteReply](t, n, &messages.SetVersionPreference{Domain: "clash.p2p", Version: "both"}); !errors.Is(r.Err, messages.ErrBadVersionPreference) {
		t.Fatalf("bad version: %v", r.Err)
	}

	// Conflict found in the background: clash.p2p resolves publicly.
	wantConflicts(t, n, 5*time.Second, messages.DNSConflict{Domain: "clash.p2p", Version: "p2p", PublicIP: "198.51.100.9"})
	if got := n.dig(t, "clash.p2p", dns.TypeA); !reflect.DeepEqual(got, []string{"10.77.0.6"}) {
		t.Fatalf("clash.p2p with p2p preference = %q", got)
	}
	if r := ask[*messages.LocalDNSWriteReply](t, n, &messages.SetVersionPreference{Domain: "Clash.P2P", Version: "public"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := n.dig(t, "clash.p2p", dns.TypeA); !reflect.DeepEqual(got, []string{"198.51.100.9"}) {
		t.Fatalf("clash.p2p with public preference = %q", got)
	}
	if got := ask[*messages.GetSelectorCacheReply](t, n, &messages.GetSelectorCache{}).Prefs; !reflect.DeepEqual(got, map[string]string{"clash.p2p": "public"}) {
		t.Fatalf("selector cache = %v", got)
	}
	if n.hints.Load() < 4 {
		t.Fatalf("hints = %d, want one per write", n.hints.Load())
	}
	want := ask[*messages.GetLocalDNSReply](t, n, &messages.GetLocalDNS{})

	// Restart: a new actor system and DNS server over the reopened file.
	n.stopFn()
	n2 := startNode(t, path, up, testView())
	got := ask[*messages.GetLocalDNSReply](t, n2, &messages.GetLocalDNS{})
	if !reflect.DeepEqual(got.Records, want.Records) || !reflect.DeepEqual(got.Conflicts, want.Conflicts) {
		t.Fatalf("after restart %+v, want %+v", got, want)
	}
	if got := n2.dig(t, "clash.p2p", dns.TypeA); !reflect.DeepEqual(got, []string{"198.51.100.9"}) {
		t.Fatalf("preference lost on restart: %q", got)
	}
	if got := n2.dig(t, "mail.lan", dns.TypeMX); !reflect.DeepEqual(got, []string{"10 a.lan."}) {
		t.Fatalf("mail.lan after restart = %q", got)
	}

	// Public DNS changes: a recheck finds it (the node's upstream cache
	// is cleared first, as an operator would with clear-dns-cache).
	up.SetA("clash.p2p", "")
	up.SetA("site.p2p", "198.51.100.20")
	for _, d := range []string{"clash.p2p", "site.p2p"} {
		if _, err := n2.srv.ClearCache(d); err != nil {
			t.Fatal(err)
		}
	}
	n2.sys.Root.Send(n2.pid, &messages.RecheckDNSConflicts{})
	wantConflicts(t, n2, 5*time.Second, messages.DNSConflict{Domain: "site.p2p", Version: "p2p", PublicIP: "198.51.100.20"})

	// The domain leaves the view: its conflict goes.
	n2.view.Store(&view.Snapshot{Version: 2, Domains: map[string]*view.Domain{}})
	testutil.Eventually(t, 5*time.Second, func() error {
		if c := ask[*messages.GetLocalDNSReply](t, n2, &messages.GetLocalDNS{}).Conflicts; len(c) != 0 {
			return fmt.Errorf("conflicts %+v", c)
		}
		return nil
	})
}

// A record equal to one already there (name, class, type and data; the
// TTL aside) is refused, on add and on update: an RRset holds no
// duplicates (RFC 2181 §5), and DNS answers each record once.
func TestDuplicateRecordRefused(t *testing.T) {
	up := dnstest.Start(t, nil)
	n := startNode(t, filepath.Join(t.TempDir(), "node.db"), up, testView())
	for _, js := range []string{
		`{"name":"a.lan","type":"A","ttl":60,"data":"192.168.1.10"}`,
		`{"name":"a.lan","type":"A","ttl":60,"data":"192.168.1.11"}`,
	} {
		if r := ask[*messages.LocalDNSWriteReply](t, n, &messages.AddLocalRecord{Record: rec(t, js)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if r := ask[*messages.LocalDNSWriteReply](t, n, &messages.AddLocalRecord{Record: rec(t, `{"name":"A.lan.","type":"A","ttl":300,"data":"192.168.1.10"}`)}); !errors.Is(r.Err, messages.ErrInvalidRecord) {
		t.Fatalf("duplicate add: %v, want messages.ErrInvalidRecord", r.Err)
	}
	if r := ask[*messages.LocalDNSWriteReply](t, n, &messages.UpdateLocalRecord{Index: 1, Record: rec(t, `{"name":"a.lan","type":"A","ttl":60,"data":"192.168.1.10"}`)}); !errors.Is(r.Err, messages.ErrInvalidRecord) {
		t.Fatalf("update into a duplicate: %v, want messages.ErrInvalidRecord", r.Err)
	}
	// A record updated to itself is no duplicate.
	if r := ask[*messages.LocalDNSWriteReply](t, n, &messages.UpdateLocalRecord{Index: 0, Record: rec(t, `{"name":"a.lan","type":"A","ttl":120,"data":"192.168.1.10"}`)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := n.dig(t, "a.lan", dns.TypeA); !reflect.DeepEqual(got, []string{"192.168.1.10", "192.168.1.11"}) {
		t.Fatalf("a.lan = %q, want each address once", got)
	}
}

// The records of one name and type written with different TTLs are one
// RRset, answered with one TTL, the smallest (RFC 2181 §5.2: the TTLs of
// an RRset are the same), exact names and wildcards alike, over UDP and
// TCP.
func TestRRsetAnswersOneTTL(t *testing.T) {
	up := dnstest.Start(t, nil)
	n := startNode(t, filepath.Join(t.TempDir(), "node.db"), up, testView())
	for _, js := range []string{
		`{"name":"a.lan","type":"A","ttl":300,"data":"192.168.1.10"}`,
		`{"name":"a.lan","type":"A","ttl":60,"data":"192.168.1.11"}`,
		`{"name":"a.lan","type":"A","ttl":600,"data":"192.168.1.12"}`,
		`{"name":"*.w.lan","type":"TXT","ttl":120,"data":"one"}`,
		`{"name":"*.w.lan","type":"TXT","ttl":30,"data":"two"}`,
	} {
		if r := ask[*messages.LocalDNSWriteReply](t, n, &messages.AddLocalRecord{Record: rec(t, js)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for _, tt := range []struct {
		name  string
		qtype uint16
		n     int
		ttl   uint32
	}{{"a.lan.", dns.TypeA, 3, 60}, {"x.w.lan.", dns.TypeTXT, 2, 30}} {
		for _, network := range []string{"udp", "tcp"} {
			m, _, err := (&dns.Client{Net: network, Timeout: 3 * time.Second}).Exchange(new(dns.Msg).SetQuestion(tt.name, tt.qtype), n.srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Answer) != tt.n {
				t.Fatalf("%s %s over %s: %d answers, want %d: %v", tt.name, dns.TypeToString[tt.qtype], network, len(m.Answer), tt.n, m.Answer)
			}
			for _, rr := range m.Answer {
				if rr.Header().Ttl != tt.ttl {
					t.Fatalf("%s %s over %s: %v, want every TTL %d", tt.name, dns.TypeToString[tt.qtype], network, m.Answer, tt.ttl)
				}
			}
		}
	}
}

// A stored record that no longer validates is skipped, not lost: a
// record added afterwards takes a key of its own, even when the skipped
// record's key is the highest.
func TestSkippedRecordKeepsItsKey(t *testing.T) {
	sys, db := bare(t)
	const badJSON = `{"name":"x.lan","type":"BOGUS"}`
	if err := db.Set(recordKey(1), `{"name":"a.lan","type":"A","ttl":60,"data":"192.0.2.1"}`); err != nil {
		t.Fatal(err)
	}
	if err := db.Set(recordKey(2), badJSON); err != nil {
		t.Fatal(err)
	}
	n := &node{sys: sys, pid: sys.Root.Spawn(Props(Deps{Store: db, Log: slog.New(slog.DiscardHandler)}))}
	if r := ask[*messages.LocalDNSWriteReply](t, n, &messages.AddLocalRecord{Record: rec(t, `{"name":"b.lan","type":"A","data":"192.0.2.2"}`)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if v, err := db.Get(recordKey(2)); err != nil || v != badJSON {
		t.Fatalf("skipped record's key holds %q (%v), want %q", v, err, badJSON)
	}
	if got := ask[*messages.GetLocalDNSReply](t, n, &messages.GetLocalDNS{}).Records; len(got) != 2 || got[1].Name != "b.lan" {
		t.Fatalf("records %+v", got)
	}
}

func TestRecheckTicker(t *testing.T) {
	up := dnstest.Start(t, nil)
	n := startNode(t, filepath.Join(t.TempDir(), "node.db"), up, testView(), func(d *Deps) { d.RecheckEvery = 20 * time.Millisecond })
	// Both resolved domains were looked up once at start (NXDOMAIN).
	testutil.Eventually(t, 5*time.Second, func() error {
		if h := up.Hits(); h < 2 {
			return fmt.Errorf("%d public lookups", h)
		}
		return nil
	})
	if c := ask[*messages.GetLocalDNSReply](t, n, &messages.GetLocalDNS{}).Conflicts; len(c) != 0 {
		t.Fatalf("conflicts before public data: %+v", c)
	}
	// The domain starts resolving publicly; the ticker's rechecks find it
	// once the node's negative cache entry is gone.
	up.SetA("site.p2p", "198.51.100.30")
	if _, err := n.srv.ClearCache("site.p2p"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if c := ask[*messages.GetLocalDNSReply](t, n, &messages.GetLocalDNS{}).Conflicts; len(c) != 1 || c[0].PublicIP != "198.51.100.30" {
			return fmt.Errorf("conflicts %+v", c)
		}
		return nil
	})
}

// blockingLookups is a PublicLookup that holds every lookup until its
// context ends, counting what it sees.
type blockingLookups struct {
	started, running, cancelled atomic.Int64
}

func (b *blockingLookups) lookup(ctx context.Context, name string) (string, error) {
	b.started.Add(1)
	b.running.Add(1)
	defer b.running.Add(-1)
	<-ctx.Done()
	b.cancelled.Add(1)
	return "", ctx.Err()
}

// manyDomains is a view of n resolved p2p domains.
func manyDomains(n int) *view.Published {
	v := &view.Published{}
	ds := map[string]*view.Domain{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("d%02d.p2p", i)
		ds[name] = &view.Domain{Name: name, Status: "resolved", IP: netip.AddrFrom4([4]byte{10, 77, 1, byte(i + 1)})}
	}
	v.Store(&view.Snapshot{Version: 1, Domains: ds})
	return v
}

// bare is an actor system and a store for tests that spawn the actor
// themselves.
func bare(t *testing.T) (*actor.ActorSystem, *store.DB) {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "node.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sys := actor.NewActorSystem()
	t.Cleanup(func() {
		sys.Shutdown()
		db.Close()
	})
	return sys, db
}

// Stopping the actor ends the view subscription, the recheck ticker, the
// lookups in flight and the ones waiting for a slot: nothing is left
// running once StopFuture returns.
func TestStopEndsEverything(t *testing.T) {
	sys, db := bare(t)
	testutil.NoLeaks(t) // after the system's own goroutines started
	lk := &blockingLookups{}
	const domains = 3 * maxLookups
	pid := sys.Root.Spawn(Props(Deps{Store: db, View: manyDomains(domains), PublicLookup: lk.lookup,
		RecheckEvery: 5 * time.Millisecond, Log: slog.New(slog.DiscardHandler)}))
	testutil.Eventually(t, 5*time.Second, func() error {
		if r := lk.running.Load(); r != maxLookups {
			return fmt.Errorf("%d lookups running, want %d (the rest wait for a slot)", r, maxLookups)
		}
		return nil
	})
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if r := lk.running.Load(); r != 0 {
		t.Fatalf("%d lookups still running after stop", r)
	}
	if s := lk.started.Load(); s != maxLookups {
		t.Fatalf("%d lookups started, want %d: the waiting ones must end without starting", s, maxLookups)
	}
}

// A node that learns thousands of domains at once (a restart, a join)
// queues their lookups: maxLookups goroutines run them, however long the
// backlog.
func TestBacklogHoldsNoGoroutines(t *testing.T) {
	sys, db := bare(t)
	lk := &blockingLookups{}
	before := runtime.NumGoroutine()
	pid := sys.Root.Spawn(Props(Deps{Store: db, View: manyDomains(2000), PublicLookup: lk.lookup,
		RecheckEvery: -1, Log: slog.New(slog.DiscardHandler)}))
	testutil.Eventually(t, 5*time.Second, func() error {
		if r := lk.running.Load(); r != maxLookups {
			return fmt.Errorf("%d lookups running, want %d", r, maxLookups)
		}
		return nil
	})
	// The view's 2,000 names reached the actor once the lookups run; a
	// round trip through its mailbox makes sure it queued them all.
	if _, err := sys.Root.RequestFuture(pid, &messages.GetLocalDNS{}, 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	if n := runtime.NumGoroutine() - before; n > maxLookups+20 {
		t.Fatalf("%d goroutines more than before for 2,000 queued lookups (%d run at once)", n, maxLookups)
	}
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
}

// crash makes the test middleware panic inside Receive.
type crash struct{}

func crashOn(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		if _, ok := env.Message.(*crash); ok {
			panic("test crash")
		}
		next(c, env)
	}
}

// A restart ends the old incarnation's goroutines, reloads the state and
// keeps the published version growing.
func TestRestart(t *testing.T) {
	sys, db := bare(t)
	pub := &view.LocalPublished{}
	pub.Store(&messages.LocalSnapshot{Version: 41}) // what an earlier incarnation published
	lk := &blockingLookups{}
	props := Props(Deps{Store: db, Published: pub, View: manyDomains(maxLookups), PublicLookup: lk.lookup,
		RecheckEvery: -1, Log: slog.New(slog.DiscardHandler)}).Configure(actor.WithReceiverMiddleware(crashOn))
	n := &node{sys: sys, pid: sys.Root.Spawn(props)}
	if r := ask[*messages.LocalDNSWriteReply](t, n, &messages.AddLocalRecord{Record: rec(t, `{"name":"a.lan","type":"A","data":"192.0.2.1"}`)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if v := pub.Load().Version; v != 43 {
		t.Fatalf("version %d after start and one write, want 43", v)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if r := lk.running.Load(); r != maxLookups {
			return fmt.Errorf("%d lookups running", r)
		}
		return nil
	})
	sys.Root.Send(n.pid, &crash{})
	// The new incarnation published again, from the store, and looks the
	// domains up again; the old lookups were cancelled.
	testutil.Eventually(t, 5*time.Second, func() error {
		if v := pub.Load().Version; v != 44 {
			return fmt.Errorf("version %d, want 44", v)
		}
		if c := lk.cancelled.Load(); c != maxLookups {
			return fmt.Errorf("%d old lookups cancelled, want %d", c, maxLookups)
		}
		if s := lk.started.Load(); s != 2*maxLookups {
			return fmt.Errorf("%d lookups started, want %d", s, 2*maxLookups)
		}
		return nil
	})
	if got := pub.Load().Records; len(got) != 1 || got[0].Name != "a.lan" {
		t.Fatalf("records after restart: %+v", got)
	}
	if err := sys.Root.StopFuture(n.pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if r := lk.running.Load(); r != 0 {
		t.Fatalf("%d lookups running after stop", r)
	}
}

// A public lookup that fails is retried with backoff, not at every view
// change: a burst of claims publishes many views, and every failed domain
// used to be looked up again at each one. An explicit recheck still
// retries at once.
// A domain whose lookup fails while the others answer (its own SERVFAIL)
// backs off on its own: views and new domains do not retry it.
func TestFailedLookupBacksOff(t *testing.T) {
	sys, db := bare(t)
	var lookups atomic.Int64
	failing := func(ctx context.Context, name string) (string, error) {
		lookups.Add(1)
		if name == "d00.p2p" {
			return "", fmt.Errorf("SERVFAIL")
		}
		return "", nil
	}
	v := manyDomains(1)
	pid := sys.Root.Spawn(Props(Deps{Store: db, View: v, PublicLookup: failing, Log: slog.New(slog.DiscardHandler)}))
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := lookups.Load(); n != 1 {
			return fmt.Errorf("%d lookups, want the first one", n)
		}
		return nil
	})
	// Many views with the same domain (and a new one each time): only the
	// new domains are looked up.
	for i := 2; i <= 50; i++ {
		s := v.Load()
		ds := maps.Clone(s.Domains)
		name := fmt.Sprintf("new%02d.p2p", i)
		ds[name] = &view.Domain{Name: name, Status: "resolved", IP: netip.AddrFrom4([4]byte{10, 77, 2, byte(i)})}
		v.Store(&view.Snapshot{Version: uint64(i), Domains: ds})
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := lookups.Load(); n != 50 {
			return fmt.Errorf("%d lookups, want 50 (one per domain)", n)
		}
		return nil
	})
	sys.Root.Send(pid, &messages.RecheckDNSConflicts{})
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := lookups.Load(); n != 100 {
			return fmt.Errorf("%d lookups after a recheck, want 100", n)
		}
		return nil
	})
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
}

// An upstream that does not answer at all pauses the checks: a few
// lookups fail, then one probe at a time goes out, backing off, until one
// answers; then every waiting domain is checked and its conflict found.
func TestUpstreamOutagePausesChecks(t *testing.T) {
	sys, db := bare(t)
	var up atomic.Bool
	var lookups, failed atomic.Int64
	lookup := func(ctx context.Context, name string) (string, error) {
		lookups.Add(1)
		if !up.Load() {
			failed.Add(1)
			return "", fmt.Errorf("read udp 127.0.0.1:9: connection refused")
		}
		if name == "d07.p2p" {
			return "198.51.100.7", nil
		}
		return "", nil
	}
	const domains = 200
	v := manyDomains(domains)
	logs, log := debugLog()
	pid := sys.Root.Spawn(Props(Deps{Store: db, View: v, PublicLookup: lookup, RetryFirst: 20 * time.Millisecond, RecheckEvery: -1, Log: log}))
	// The lookups that found the upstream down (at most the pacer's burst
	// and the ones in flight go out before the actor has seen outageAfter
	// failures), then one probe at a time, backing off from 20 ms: wait
	// for two failed probes, and never more lookups than that allows
	// (with room for a slow machine: the pacer lets 100 a second through
	// until the actor has seen the failures). Without the pause all 200
	// domains would be looked up, and retried.
	most := int64(outageAfter + lookupBurst + maxLookups + 50)
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := failed.Load(); n > most {
			t.Fatalf("%d lookups against a dead upstream, want at most %d (checks paused)", n, most)
		}
		if p := strings.Count(logs.String(), "upstream resolver still down"); p < 2 {
			return fmt.Errorf("%d failed probes logged, want 2", p)
		}
		return nil
	})
	if !strings.Contains(logs.String(), "conflict checks paused") {
		t.Fatalf("no warning that the checks paused:\n%s", logs.String())
	}
	up.Store(true)
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := lookups.Load() - failed.Load(); n < domains {
			return fmt.Errorf("%d answered lookups, want every domain's", n)
		}
		return nil
	})
	wantConflicts(t, &node{sys: sys, pid: pid}, 5*time.Second, messages.DNSConflict{Domain: "d07.p2p", Version: "p2p", PublicIP: "198.51.100.7"})
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
}

// One domain failing again and again while nothing else is looked up is
// that domain's trouble, not an outage: the checks never pause, and a
// domain that appears later is checked at once.
func TestOneFailingDomainIsNoOutage(t *testing.T) {
	sys, db := bare(t)
	var bad atomic.Int64
	lookup := func(ctx context.Context, name string) (string, error) {
		if name == "d00.p2p" {
			bad.Add(1)
			return "", fmt.Errorf("SERVFAIL")
		}
		return "198.51.100.77", nil
	}
	logs, log := debugLog()
	v := manyDomains(1)
	pid := sys.Root.Spawn(Props(Deps{Store: db, View: v, PublicLookup: lookup, RetryFirst: 5 * time.Millisecond, RecheckEvery: 20 * time.Millisecond, Log: log}))
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := bad.Load(); n < outageAfter+2 {
			return fmt.Errorf("d00.p2p looked up %d times", n)
		}
		return nil
	})
	s := v.Load()
	ds := maps.Clone(s.Domains)
	ds["late.p2p"] = &view.Domain{Name: "late.p2p", Status: "resolved", IP: netip.MustParseAddr("10.77.9.9")}
	v.Store(&view.Snapshot{Version: 2, Domains: ds})
	wantConflicts(t, &node{sys: sys, pid: pid}, 5*time.Second, messages.DNSConflict{Domain: "late.p2p", Version: "p2p", PublicIP: "198.51.100.77"})
	if strings.Contains(logs.String(), "conflict checks paused") {
		t.Fatalf("one failing domain paused the checks:\n%s", logs.String())
	}
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestRetryDelay(t *testing.T) {
	for _, c := range []struct {
		n    int
		most time.Duration
		want time.Duration
	}{{1, time.Hour, 5 * time.Second}, {2, time.Hour, 10 * time.Second}, {4, time.Hour, 40 * time.Second},
		{30, time.Hour, time.Hour}, {3, 7 * time.Second, 7 * time.Second}} {
		if got := retryDelay(c.n, c.most, 5*time.Second); got != c.want {
			t.Errorf("retryDelay(%d, %v) = %v, want %v", c.n, c.most, got, c.want)
		}
	}
}

// A CAA value is literal text: its backslashes are answered as written
// (miekg/dns reads a CAA value as presentation text, where "\065" is
// "A" and a lone "\" at the end is dropped), as a TXT record's are.
func TestCAAValueAnsweredLiteral(t *testing.T) {
	up := dnstest.Start(t, nil)
	n := startNode(t, filepath.Join(t.TempDir(), "node.db"), up, testView())
	const value = `mailto:a\065b\\c@x.lan\`
	r := messages.LocalRecord{Name: "caa.lan", Type: "CAA", Class: "IN", TTL: 60, Tag: "iodef", Value: value}
	if w := ask[*messages.LocalDNSWriteReply](t, n, &messages.AddLocalRecord{Record: r}); w.Err != nil {
		t.Fatal(w.Err)
	}
	for _, network := range []string{"udp", "tcp"} {
		m, _, err := (&dns.Client{Net: network, Timeout: 3 * time.Second}).Exchange(new(dns.Msg).SetQuestion("caa.lan.", dns.TypeCAA), n.srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Answer) != 1 {
			t.Fatalf("over %s: %v, want one CAA", network, m.Answer)
		}
		if caa, ok := m.Answer[0].(*dns.CAA); !ok || caa.Value != value {
			t.Fatalf("over %s: %v, want the value %q", network, m.Answer[0], value)
		}
	}
}
