package ledger

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/domain"
	"peerdns/internal/store"
	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// An auto-vote whose commit fails (the disk is full) is cast once the
// disk has room again, with nothing else touching its domain: in a
// network of two the other's claim had no quorum until then, on either
// node, for as long as the network stayed quiet.
func TestAutoVoteCastOnceTheDiskHasRoom(t *testing.T) {
	disk := testutil.SmallDisk(t, "1m")
	id, ldb, ndb := openOnSmallDisk(t, disk)

	const name = "quiet.p2p"
	// The domain actor holds its first evaluation of name until the disk
	// is full: the peer's claim is on disk by then, our vote is not.
	asked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold := func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if ev, ok := env.Message.(*domain.Evaluate); ok && ev.Domain == name {
				once.Do(func() {
					close(asked)
					<-release
				})
			}
			next(c, env)
		}
	}
	l, logs := newTestLedgerOn(t, ldb, ndb, id, hold)
	peers, _ := addConnectedWriters(t, l, 1)
	peer := peers[0]
	op := sign(t, peer, &messages.Op{Seq: 1, HLC: messages.HLC{Wall: time.Now().UnixMilli()}, Batch: []messages.Write{
		{Key: messages.ClaimKey(name, peer.ID()), Value: `{"hash":"` + hashA + `"}`},
		{Key: messages.VoteKey(name, peer.ID(), peer.ID()), Value: messages.VoteMarker},
	}})
	if rep := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: []*messages.Op{op}}); rep.Applied != 1 {
		t.Fatalf("apply: %+v", rep)
	}
	select {
	case <-asked:
	case <-time.After(5 * time.Second):
		t.Fatal("the domain was never evaluated")
	}
	disk.Fill()
	fillLastPage(ldb)
	close(release)
	testutil.Eventually(t, 5*time.Second, func() error {
		if !strings.Contains(logs.String(), "auto-vote failed") {
			return fmt.Errorf("our vote's commit has not failed yet")
		}
		return nil
	})
	disk.Free()

	mine := messages.VoteKey(name, id.ID(), peer.ID())
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, e := range ask[*messages.GetEntriesReply](t, l, &messages.GetEntries{}).Entries {
			if e.Key == mine {
				return nil
			}
		}
		return fmt.Errorf("no vote of ours on %s once the disk has room", name)
	})
	testutil.Eventually(t, 5*time.Second, func() error {
		if st := ask[*messages.GetConsensusReply](t, l, &messages.GetConsensus{Domain: name}).State; st.Status != "resolved" {
			return fmt.Errorf("%s: %+v, want resolved", name, st)
		}
		return nil
	})
}

// openOnSmallDisk opens an identity, a ledger.db on disk and a node.db
// elsewhere (so that only the ledger's writes fail when disk is full).
func openOnSmallDisk(t *testing.T, disk *testutil.Disk) (*identity.Identity, *store.DB, *store.DB) {
	t.Helper()
	dir := t.TempDir()
	id, err := identity.LoadOrCreate(filepath.Join(dir, "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	ldb, err := store.Open(filepath.Join(disk.Dir, "ledger.db"), store.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ldb.Close() })
	ndb, err := store.Open(filepath.Join(dir, "node.db"), store.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ndb.Close() })
	return id, ldb, ndb
}

// newTestLedgerOn starts a ledger actor on the stores given, its log
// kept, its domain actors wrapped in mw.
func newTestLedgerOn(t *testing.T, ldb, ndb *store.DB, id *identity.Identity, mw ...actor.ReceiverMiddleware) (*testLedger, *testutil.LogBuffer) {
	t.Helper()
	logs := &testutil.LogBuffer{}
	sys := actor.NewActorSystem()
	l := &testLedger{sys: sys, id: id}
	var err error
	l.pid, err = sys.Root.SpawnNamed(Props(Deps{
		Identity: id, Ledger: ldb, Node: ndb, Log: slog.New(slog.NewTextHandler(logs, nil)),
		DomainMiddleware: mw,
	}), "ledger")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(l.pid).Wait()
		sys.Shutdown()
	})
	return l, logs
}

// fillLastPage takes what the last page of a full disk's ledger file
// still holds, but for less than a write's few bytes of framing: no op
// fits after it.
func fillLastPage(ldb *store.DB) {
	for n := 4096; n > 0; {
		if ldb.Set("pad", strings.Repeat("x", n)) != nil {
			n /= 2
		}
	}
}

// A cleanup request of the resolved claimant whose own commit here fails
// (the disk is full) is carried out once the disk has room: dropped, it
// left this node's losing claim in place for good, the one claim left on
// the domain once every other peer had cleaned up, so the removed name
// went to this node.
func TestCleanupCarriedOutOnceTheDiskHasRoom(t *testing.T) {
	disk := testutil.SmallDisk(t, "1m")
	id, ldb, ndb := openOnSmallDisk(t, disk)
	l, logs := newTestLedgerOn(t, ldb, ndb, id)
	peers, _ := addConnectedWriters(t, l, 1)
	owner := peers[0]
	// A long name makes our cleanup op (our claim's and vote's deletions
	// name it twice) larger than the owner's request (once).
	name := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + ".p2p"
	ours := func() []string {
		var out []string
		for _, e := range ask[*messages.GetEntriesReply](t, l, &messages.GetEntries{}).Entries {
			if pk, err := messages.ParseKey(e.Key); err == nil && pk.Writer == id.ID() && pk.Domain == name {
				out = append(out, e.Key)
			}
		}
		return out
	}
	now := time.Now().UnixMilli()
	claim := sign(t, owner, &messages.Op{Seq: 1, HLC: messages.HLC{Wall: now - 1000}, Batch: []messages.Write{
		{Key: messages.ClaimKey(name, owner.ID()), Value: `{"hash":"` + hashA + `"}`},
		{Key: messages.VoteKey(name, owner.ID(), owner.ID()), Value: messages.VoteMarker},
	}})
	if rep := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: []*messages.Op{claim}}); rep.Applied != 1 {
		t.Fatalf("apply: %+v", rep)
	}
	if r := ask[*messages.AddDomainReply](t, l, &messages.AddDomain{Domain: name, Hash: hashA}); r.Err != nil {
		t.Fatal(r.Err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		st := ask[*messages.GetConsensusReply](t, l, &messages.GetConsensus{Domain: name}).State
		if st.ResolvedClaimant == nil || *st.ResolvedClaimant != owner.ID() || len(ours()) != 2 {
			return fmt.Errorf("want the owner resolved, our claim and our vote for it: %+v, ours %v", st, ours())
		}
		return nil
	})

	// The owner's request, alone in its op: the disk is made to take it
	// (its write, measured on a stand-in of its size, plus a little) and
	// not our cleanup op.
	request := sign(t, owner, &messages.Op{Seq: 2, HLC: messages.HLC{Wall: time.Now().Add(time.Minute).UnixMilli()},
		Key: messages.CleanupKey(name, owner.ID()), Value: "1"})
	b, _ := request.MarshalCBOR()
	size := func(key string, n int) int64 {
		before := ldb.FileSize()
		if err := ldb.Set(key, strings.Repeat("x", n)); err != nil {
			t.Fatal(err)
		}
		return ldb.FileSize() - before
	}
	requestSize := size("pr:"+strings.Repeat("x", len(opKey(request))-3), len(b))
	padFraming := size("pad", 3000) - 3000
	reserve := filepath.Join(disk.Dir, "reserve")
	if err := os.WriteFile(reserve, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	disk.Fill()
	fillLastPage(ldb)
	if err := os.Remove(reserve); err != nil { // one page free
		t.Fatal(err)
	}
	if err := ldb.Set("pad", strings.Repeat("x", int(4096-requestSize-60-padFraming))); err != nil {
		t.Fatal(err)
	}
	if rep := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: []*messages.Op{request}}); rep.Applied != 1 {
		t.Fatalf("apply the request: %+v", rep)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if !strings.Contains(logs.String(), "cleanup failed") {
			return fmt.Errorf("our cleanup's commit has not failed yet:\n%s", logs)
		}
		return nil
	})
	disk.Free()
	// Our claim goes; our vote for the owner too, and comes back: the
	// owner's claim is still there (its request came alone), the earliest.
	mine := messages.ClaimKey(name, id.ID())
	testutil.Eventually(t, 10*time.Second, func() error {
		if es := ours(); slices.Contains(es, mine) {
			return fmt.Errorf("our claim is still there after the owner's cleanup request: %v", es)
		}
		return nil
	})
}
