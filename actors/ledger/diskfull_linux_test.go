package ledger

import (
	"fmt"
	"log/slog"
	"path/filepath"
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
	logs := &testutil.LogBuffer{}
	sys := actor.NewActorSystem()
	l := &testLedger{sys: sys, id: id, dir: dir}
	l.pid, err = sys.Root.SpawnNamed(Props(Deps{
		Identity: id, Ledger: ldb, Node: ndb, Log: slog.New(slog.NewTextHandler(logs, nil)),
		DomainMiddleware: []actor.ReceiverMiddleware{hold},
	}), "ledger")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(l.pid).Wait()
		sys.Shutdown()
	})

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
	// The ledger file's last page may still take a few bytes: take them
	// too, so that no op fits.
	for n := 4096; n > 0; {
		if ldb.Set("pad", strings.Repeat("x", n)) != nil {
			n /= 2
		}
	}
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
