package ledger

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/http/httpx"
	"peerdns/internal/store"
	"peerdns/internal/testutil"
	"peerdns/internal/view"
	"peerdns/messages"
	"peerdns/transport/identity"
)

const hashA = "hs://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

type testLedger struct {
	sys  *actor.ActorSystem
	pid  *actor.PID
	pub  *view.Published
	id   *identity.Identity
	dir  string
	ldb  *store.DB // the ledger's store, for tests that look at what is on disk
	stop func()
}

func newTestLedger(t testing.TB, dir string) *testLedger {
	t.Helper()
	return newTestLedgerWith(t, dir, nil)
}

// newTestLedgerWith is newTestLedger with the actor's Deps changed by tune.
func newTestLedgerWith(t testing.TB, dir string, tune func(*Deps)) *testLedger {
	t.Helper()
	id, err := identity.LoadOrCreate(filepath.Join(dir, "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	ldb, err := store.Open(filepath.Join(dir, "ledger.db"), store.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	ndb, err := store.Open(filepath.Join(dir, "node.db"), store.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	sys := actor.NewActorSystem()
	pub := &view.Published{}
	d := Deps{Identity: id, Ledger: ldb, Node: ndb, Published: pub}
	if tune != nil {
		tune(&d)
	}
	pid, err := sys.Root.SpawnNamed(Props(d), "ledger")
	if err != nil {
		t.Fatal(err)
	}
	tl := &testLedger{sys: sys, pid: pid, pub: pub, id: id, dir: dir, ldb: ldb}
	stopped := false
	tl.stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = sys.Root.StopFuture(pid).Wait()
		sys.Shutdown()
		ldb.Close()
		ndb.Close()
	}
	t.Cleanup(tl.stop)
	return tl
}

func ask[R any](t testing.TB, l *testLedger, req any) R {
	t.Helper()
	r, err := httpx.Ask[R](l.sys.Root, l.pid, req, 5*time.Second)
	if err != nil {
		t.Fatalf("ask %T: %v", req, err)
	}
	return r
}

func TestSingleNodeClaimResolvesAndSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	l := newTestLedger(t, dir)
	if r := ask[*messages.AddDomainReply](t, l, &messages.AddDomain{Domain: "Example.P2P.", Hash: hashA}); r.Err != nil {
		t.Fatalf("AddDomain: %v", r.Err)
	}
	ds := ask[*messages.GetDomainsReply](t, l, &messages.GetDomains{}).Domains
	if len(ds) != 1 || ds[0].Domain != "example.p2p" || ds[0].ConsensusStatus != "resolved" || !ds[0].IsOwner || !ds[0].IsLocal {
		t.Fatalf("domains = %+v", ds)
	}
	snap := l.pub.Load()
	d, ok := snap.Lookup("www.example.p2p")
	if !ok || d.Status != "resolved" || !d.IP.IsValid() {
		t.Fatalf("snapshot lookup = %+v %v", d, ok)
	}
	ip := d.IP
	l.stop()

	l2 := newTestLedger(t, dir)
	ds = ask[*messages.GetDomainsReply](t, l2, &messages.GetDomains{}).Domains
	if len(ds) != 1 || ds[0].ConsensusStatus != "resolved" {
		t.Fatalf("after restart domains = %+v", ds)
	}
	if l2.id.ID() != l.id.ID() {
		t.Fatal("identity changed across restart")
	}
	// The view is published once the restarted ledger settles.
	testutil.Eventually(t, 5*time.Second, func() error {
		s := l2.pub.Load()
		if s == nil {
			return errors.New("no snapshot yet")
		}
		d, ok := s.Lookup("example.p2p")
		if !ok || d.Status != "resolved" {
			return fmt.Errorf("example.p2p = %+v", d)
		}
		if d.IP != ip {
			t.Fatalf("IP changed across restart: %v != %v", d.IP, ip)
		}
		return nil
	})
}

// An AddDomain with KeepSSL (a tunnel server claiming its domain again at
// its start) keeps the ssl flag of the local writer's claim when its hash
// is the same, whatever the case of its hex; with another hash it sets
// SSL as sent.
func TestAddDomainKeepSSL(t *testing.T) {
	l := newTestLedger(t, t.TempDir())
	sslOf := func(step string, want bool) {
		t.Helper()
		testutil.Eventually(t, 5*time.Second, func() error {
			if d, ok := l.pub.Load().Lookup("tls.p2p"); !ok || d.SSL != want {
				return fmt.Errorf("%s: tls.p2p = %+v, want ssl %v", step, d, want)
			}
			return nil
		})
	}
	for _, tt := range []struct {
		step string
		add  messages.AddDomain
		ssl  bool
	}{
		{"add-domain ssl", messages.AddDomain{Hash: hashA, SSL: true}, true},
		{"the tunnel's claim again", messages.AddDomain{Hash: hashA, KeepSSL: true}, true},
		{"again in capitals", messages.AddDomain{Hash: "hs://" + strings.ToUpper(hashA[5:]), KeepSSL: true}, true},
		{"another key", messages.AddDomain{Hash: hashB, KeepSSL: true}, false},
		{"add-domain ssl on that key", messages.AddDomain{Hash: hashB, SSL: true}, true},
		{"add-domain turns it off", messages.AddDomain{Hash: hashB}, false},
	} {
		tt.add.Domain = "tls.p2p"
		if r := ask[*messages.AddDomainReply](t, l, &tt.add); r.Err != nil {
			t.Fatalf("%s: %v", tt.step, r.Err)
		}
		sslOf(tt.step, tt.ssl)
	}
}

func TestRemoveDomain(t *testing.T) {
	l := newTestLedger(t, t.TempDir())
	if r := ask[*messages.RemoveDomainReply](t, l, &messages.RemoveDomain{Domain: "x.p2p"}); !errors.Is(r.Err, messages.ErrNotOwner) {
		t.Fatalf("remove unclaimed = %v, want ErrNotOwner", r.Err)
	}
	ask[*messages.AddDomainReply](t, l, &messages.AddDomain{Domain: "x.p2p", Hash: hashA})
	if r := ask[*messages.RemoveDomainReply](t, l, &messages.RemoveDomain{Domain: "x.p2p"}); r.Err != nil {
		t.Fatalf("remove = %v", r.Err)
	}
	if ds := ask[*messages.GetDomainsReply](t, l, &messages.GetDomains{}).Domains; len(ds) != 0 {
		t.Fatalf("domains after remove = %+v", ds)
	}
	if es := ask[*messages.GetEntriesReply](t, l, &messages.GetEntries{}).Entries; len(es) != 0 {
		t.Fatalf("entries after remove = %+v", es)
	}
}

func TestRejectsForgedOps(t *testing.T) {
	l := newTestLedger(t, t.TempDir())
	stranger, _ := identity.Generate()
	op := &messages.Op{Writer: stranger.ID(), Seq: 1, HLC: messages.HLC{Wall: 1}, Key: messages.ClaimKey("evil.p2p", stranger.ID()), Value: `{"hash":"` + hashA + `"}`}
	b, _ := op.SigningBytes()
	op.Sig = stranger.Sign(b)
	forged := *op
	forged.Writer = l.id.ID()
	forged.Key = messages.ClaimKey("evil.p2p", l.id.ID())
	forged.Seq = 2 // the next seq of the node's own log: only the signature can stop it
	r := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: []*messages.Op{op, &forged}})
	if r.Applied != 0 || r.Rejected != 2 {
		t.Fatalf("ApplyOps = %+v, want both rejected", r)
	}
	m := ask[*messages.GetConsensusMetricsReply](t, l, &messages.GetConsensusMetrics{}).Metrics
	if m.ValidationFailures != 2 {
		t.Fatalf("validationFailures = %d", m.ValidationFailures)
	}
}

// A joiner that has its network's key but no op yet takes its root and
// its inviter as writers (and no one else), across a restart too: it
// would refuse every peer otherwise.
func TestJoinerTakesRootAndInviterUntilSynced(t *testing.T) {
	dir := t.TempDir()
	join := func(d *Deps) { d.Join = true }
	l := newTestLedgerWith(t, dir, join)
	root, inviter, stranger := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	if r := ask[*messages.JoinNetworkReply](t, l, &messages.JoinNetwork{Key: strings.Repeat("0", 64), Root: root, Inviter: inviter}); r.Err != nil {
		t.Fatal(r.Err)
	}
	check := func(l *testLedger) {
		t.Helper()
		for id, want := range map[string]bool{root: true, inviter: true, stranger: false, "": false} {
			if got := ask[*messages.IsWriterReply](t, l, &messages.IsWriter{ID: id}).OK; got != want {
				t.Errorf("IsWriter(%.8q) = %v, want %v", id, got, want)
			}
		}
	}
	check(l)
	l.stop()
	check(newTestLedgerWith(t, dir, join))
}

// GetWriters answers the membership the peer network's liveness
// suspects from: every writer the ledger holds (us and those added),
// sorted, and no one else.
func TestGetWritersListsTheMembership(t *testing.T) {
	l := newTestLedger(t, t.TempDir())
	_, added := addConnectedWriters(t, l, 3)
	want := append([]string{l.id.ID()}, added...)
	slices.Sort(want)
	if got := ask[*messages.GetWritersReply](t, l, &messages.GetWriters{}).IDs; !slices.Equal(got, want) {
		t.Fatalf("GetWriters = %.8q, want %.8q", got, want)
	}
}

// The resolved claimant's remove-domain asks every peer to clean up: its
// op writes the cleanup request, then deletes its claim and votes, in
// one batch. A peer applying it drops its own claim and votes on the
// domain that are older than the request. The same request from a
// writer that is not the resolved claimant changes nothing.
func TestCleanupRequestInABatch(t *testing.T) {
	l := newTestLedger(t, t.TempDir())
	peers, _ := addConnectedWriters(t, l, 2)
	owner, other := peers[0], peers[1]
	const name = "gone.p2p"
	apply := func(ops ...*messages.Op) {
		t.Helper()
		if rep := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: ops}); rep.Applied != len(ops) {
			t.Fatalf("apply: %+v", rep)
		}
	}
	ours := func() []string {
		var out []string
		for _, e := range ask[*messages.GetEntriesReply](t, l, &messages.GetEntries{}).Entries {
			if pk, err := messages.ParseKey(e.Key); err == nil && pk.Writer == l.id.ID() && pk.Domain == name {
				out = append(out, e.Key)
			}
		}
		return out
	}
	now := time.Now().UnixMilli()
	// The owner claims first and votes for itself; we vote for it too,
	// then claim the name ourselves and lose (a conflict).
	apply(sign(t, owner, &messages.Op{Seq: 1, HLC: messages.HLC{Wall: now - 1000}, Batch: []messages.Write{
		{Key: messages.ClaimKey(name, owner.ID()), Value: `{"hash":"` + hashA + `"}`},
		{Key: messages.VoteKey(name, owner.ID(), owner.ID()), Value: messages.VoteMarker},
	}}))
	ask[*messages.AddDomainReply](t, l, &messages.AddDomain{Domain: name, Hash: hashA})
	testutil.Eventually(t, 5*time.Second, func() error {
		st := ask[*messages.GetConsensusReply](t, l, &messages.GetConsensus{Domain: name}).State
		if st.ResolvedClaimant == nil || *st.ResolvedClaimant != owner.ID() || len(ours()) < 2 {
			return fmt.Errorf("want the owner resolved and our claim and vote: %+v, ours %v", st, ours())
		}
		return nil
	})

	// Another writer's request: refused, our entries stay.
	later := time.Now().Add(time.Hour).UnixMilli()
	apply(sign(t, other, &messages.Op{Seq: 1, HLC: messages.HLC{Wall: later}, Batch: []messages.Write{
		{Key: messages.CleanupKey(name, other.ID()), Value: "1"},
		{Key: messages.ClaimKey(name, other.ID()), Delete: true},
	}}))
	// A request of ours goes through the mailbox after it: by its answer
	// the refused request would have run.
	ask[*messages.AddDomainReply](t, l, &messages.AddDomain{Domain: "barrier.p2p", Hash: hashA})
	if es := ours(); len(es) < 2 {
		t.Fatalf("a writer that is not the resolved claimant cleaned up our entries: left %v", es)
	}
	// The owner's remove, as remove-domain writes it.
	apply(sign(t, owner, &messages.Op{Seq: 2, HLC: messages.HLC{Wall: later + 1}, Batch: []messages.Write{
		{Key: messages.CleanupKey(name, owner.ID()), Value: "1"},
		{Key: messages.ClaimKey(name, owner.ID()), Delete: true},
		{Key: messages.VoteKey(name, owner.ID(), owner.ID()), Delete: true},
	}}))
	testutil.Eventually(t, 5*time.Second, func() error {
		if es := ours(); len(es) > 0 {
			return fmt.Errorf("our entries %v are still there after the owner's cleanup request", es)
		}
		return nil
	})
}

// A joiner that applies the domains of its network before the op that
// makes it a writer (its sync comes in pages, its inviter's ops maybe
// last) cannot vote on them then; once that op is applied it casts its
// auto-vote on each of them, as it would on a claim that came later.
func TestJoinerVotesOnceAWriter(t *testing.T) {
	l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) { d.Join = true })
	root, _ := identity.Generate()
	r := root.ID()
	if rep := ask[*messages.JoinNetworkReply](t, l, &messages.JoinNetwork{Key: strings.Repeat("0", 64), Root: r, Inviter: r}); rep.Err != nil {
		t.Fatal(rep.Err)
	}
	l.sys.Root.Send(l.pid, &messages.PeerSetChanged{Connected: []string{r}})
	apply := func(ops ...*messages.Op) {
		t.Helper()
		if rep := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: ops}); rep.Applied != len(ops) {
			t.Fatalf("apply: %+v", rep)
		}
	}
	const name = "early.p2p"
	now := time.Now().UnixMilli()
	apply(sign(t, root, &messages.Op{Seq: 1, HLC: messages.HLC{Wall: now}, Key: messages.NetworkKey(r), Value: strings.Repeat("0", 64)}),
		sign(t, root, &messages.Op{Seq: 2, HLC: messages.HLC{Wall: now + 1}, Batch: []messages.Write{
			{Key: messages.ClaimKey(name, r), Value: `{"hash":"` + hashA + `"}`},
			{Key: messages.VoteKey(name, r, r), Value: messages.VoteMarker},
		}}))
	// Answered once the domain has settled: evaluated without our vote.
	if rep := ask[*messages.RecalculateReply](t, l, &messages.Recalculate{Domain: name}); rep.Err != nil {
		t.Fatal(rep.Err)
	}
	if st := ask[*messages.GetConsensusReply](t, l, &messages.GetConsensus{Domain: name}).State; st.TotalVotes != 1 || st.Status != "insufficient_quorum" {
		t.Fatalf("before we are a writer: %+v, want the root's vote alone", st)
	}
	apply(sign(t, root, &messages.Op{Seq: 3, HLC: messages.HLC{Wall: now + 2}, Key: messages.WriterKey(l.id.ID(), r), Value: "1"}))
	mine := messages.VoteKey(name, l.id.ID(), r)
	testutil.Eventually(t, 5*time.Second, func() error {
		for _, e := range ask[*messages.GetEntriesReply](t, l, &messages.GetEntries{}).Entries {
			if e.Key == mine {
				return nil
			}
		}
		return fmt.Errorf("no vote of ours on %s once a writer", name)
	})
	testutil.Eventually(t, 5*time.Second, func() error {
		if st := ask[*messages.GetConsensusReply](t, l, &messages.GetConsensus{Domain: name}).State; st.Status != "resolved" {
			return fmt.Errorf("with our vote: %+v, want resolved", st)
		}
		return nil
	})
}

// A first start that stopped between its two commits (the network's key
// and root, then the genesis op: a crash, or a disk that filled up)
// leaves the key and root on disk without the op. The next start writes
// the op with that key, so the node is a writer of its own network.
func TestGenesisCompletedAfterAStartStoppedHalfway(t *testing.T) {
	dir := t.TempDir()
	id, err := identity.LoadOrCreate(filepath.Join(dir, "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	ldb, err := store.Open(filepath.Join(dir, "ledger.db"), store.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("5", 64)
	if err := ldb.Update(func(tx *store.Tx) error {
		if err := tx.Set(metaRoot, id.ID()); err != nil {
			return err
		}
		return tx.Set(metaNetwork, key)
	}); err != nil {
		t.Fatal(err)
	}
	ldb.Close()

	l := newTestLedger(t, dir)
	if r := ask[*messages.AddDomainReply](t, l, &messages.AddDomain{Domain: "half.p2p", Hash: hashA}); r.Err != nil {
		t.Fatalf("AddDomain after a genesis stopped halfway: %v", r.Err)
	}
	if n := ask[*messages.GetNetworkReply](t, l, &messages.GetNetwork{}); n.Key != key || n.Root != id.ID() {
		t.Fatalf("network = %+v, want key %.8s… and root %.8s…", n, key, id.ID())
	}
	if st := ask[*messages.GetConsensusReply](t, l, &messages.GetConsensus{Domain: "half.p2p"}).State; st.Status != "resolved" {
		t.Fatalf("half.p2p: %+v, want resolved", st)
	}
}

// Cleanup requests read back from ledger.db at start were honoured (or
// ignored) when they were first applied: a restart neither runs them
// again nor warns, for each of them, that a writer who is not the
// domain's resolved claimant asked for one.
func TestCleanupRequestsOnDiskAreNotWarnedAtStart(t *testing.T) {
	dir := t.TempDir()
	l := newTestLedger(t, dir)
	peers, _ := addConnectedWriters(t, l, 1)
	owner := peers[0]
	now := time.Now().UnixMilli()
	ops := []*messages.Op{
		sign(t, owner, &messages.Op{Seq: 1, HLC: messages.HLC{Wall: now}, Batch: []messages.Write{
			{Key: messages.ClaimKey("gone.p2p", owner.ID()), Value: `{"hash":"` + hashA + `"}`},
			{Key: messages.VoteKey("gone.p2p", owner.ID(), owner.ID()), Value: messages.VoteMarker},
		}}),
	}
	if rep := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: ops}); rep.Applied != 1 {
		t.Fatalf("apply: %+v", rep)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		st := ask[*messages.GetConsensusReply](t, l, &messages.GetConsensus{Domain: "gone.p2p"}).State
		if st.ResolvedClaimant == nil || *st.ResolvedClaimant != owner.ID() {
			return fmt.Errorf("gone.p2p: %+v, want the owner resolved", st)
		}
		return nil
	})
	rm := sign(t, owner, &messages.Op{Seq: 2, HLC: messages.HLC{Wall: now + 1}, Batch: []messages.Write{
		{Key: messages.CleanupKey("gone.p2p", owner.ID()), Value: "1"},
		{Key: messages.ClaimKey("gone.p2p", owner.ID()), Delete: true},
		{Key: messages.VoteKey("gone.p2p", owner.ID(), owner.ID()), Delete: true},
	}})
	if rep := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: []*messages.Op{rm}}); rep.Applied != 1 {
		t.Fatalf("apply: %+v", rep)
	}
	l.stop()

	logs := &testutil.LogBuffer{}
	l = newTestLedgerWith(t, dir, func(d *Deps) { d.Log = slog.New(slog.NewTextHandler(logs, nil)) })
	ask[*messages.GetDomainsReply](t, l, &messages.GetDomains{})
	if strings.Contains(logs.String(), "ignoring cleanup") {
		t.Fatalf("a restart warned of a cleanup request it read from disk:\n%s", logs)
	}
}
