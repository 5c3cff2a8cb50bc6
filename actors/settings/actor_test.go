package settings

import (
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/ledger"
	"peerdns/internal/store"
	"peerdns/internal/testutil"
	"peerdns/internal/view"
	"peerdns/messages"
	"peerdns/transport/identity"
)

func openStore(t *testing.T, path string) *store.DB {
	t.Helper()
	db, err := store.Open(path, store.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Updates are handled one at a time, even one that waits for the ledger
// (SUBNETS): an update that arrives meanwhile is not saved and applied
// in the middle of it, so the value that runs is the value saved, and
// the one the next start uses.
func TestUpdatesDuringSubnetsChangeKeepOrder(t *testing.T) {
	dir := t.TempDir()
	saved := openStore(t, filepath.Join(dir, "node.db"))
	// The ledger's own node store: held below, as a slow disk would, so
	// its SetSubnets waits.
	ledgerNode := openStore(t, filepath.Join(dir, "ledger-node.db"))
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return log }))
	t.Cleanup(sys.Shutdown)
	root := sys.Root
	led := root.Spawn(ledger.Props(ledger.Deps{Identity: id, Ledger: openStore(t, filepath.Join(dir, "ledger.db")),
		Node: ledgerNode, Published: &view.Published{}, Log: log}))
	if _, err := root.RequestFuture(led, &messages.GetSubnets{}, 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	live := "info"
	set := root.Spawn(Props(Deps{Store: saved, Ledger: led, Log: log, Timeout: 10 * time.Second,
		InForce: map[string]string{LogLevel: "info"},
		Apply: map[string]func(string) error{LogLevel: func(v string) error {
			mu.Lock()
			defer mu.Unlock()
			live = v
			return nil
		}},
	}))

	held, release := make(chan struct{}), make(chan struct{})
	go ledgerNode.UpdateLazy(func(*store.Tx) error {
		close(held)
		<-release
		return nil
	})
	<-held
	first := root.RequestFuture(set, &messages.UpdateSettings{Settings: map[string]string{
		LogLevel: "debug", Subnets: `[{"base":"10.9.0.0","cidr":24,"startIndex":2}]`,
	}}, 10*time.Second)
	testutil.Eventually(t, 5*time.Second, func() error {
		_, err := saved.Get(Prefix + LogLevel)
		return err
	})
	second := root.RequestFuture(set, &messages.UpdateSettings{Settings: map[string]string{LogLevel: "warn"}}, 10*time.Second)
	close(release)
	for _, f := range []*actor.Future{first, second} {
		res, err := f.Result()
		if r, ok := res.(*messages.UpdateSettingsReply); err != nil || !ok || r.Err != nil || len(r.Errors) > 0 {
			t.Fatalf("update: %#v %v", res, err)
		}
	}
	got, err := saved.Get(Prefix + LogLevel)
	mu.Lock()
	defer mu.Unlock()
	if err != nil || got != live || live != "warn" {
		t.Fatalf("LOG_LEVEL saved %q (%v), running %q; want both warn, the last update", got, err, live)
	}
}

// A value saved in another spelling than the node lists it (upper-case
// enum, spaces in a list, a number with a leading zero, an address for a
// network) is the value in force after the restart it asked for: GET
// lists that value and no restart as pending.
func TestSavedValueInForceAfterRestart(t *testing.T) {
	db := openStore(t, filepath.Join(t.TempDir(), "node.db"))
	log := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return log }))
	t.Cleanup(sys.Shutdown)
	var before config
	inForce, src, err := ApplySaved(before.fields(), nil, db, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	first := sys.Root.Spawn(Props(Deps{Store: db, InForce: inForce, Sources: src, Log: log}))
	update := map[string]string{
		P2PTCP: "FALSE", BootstrapPeers: "192.0.2.1:7740, 192.0.2.2:7740", ReplicaSetSize: "007",
		DNSRecursionAllow: "10.1.2.3/8, 192.0.2.7",
	}
	res, err := sys.Root.RequestFuture(first, &messages.UpdateSettings{Settings: update}, 5*time.Second).Result()
	if r, ok := res.(*messages.UpdateSettingsReply); err != nil || !ok || r.Err != nil || len(r.Errors) > 0 {
		t.Fatalf("update: %#v %v", res, err)
	}

	// The restart: the saved values laid over a fresh config.
	var after config
	inForce, src, err = ApplySaved(after.fields(), nil, db, func(msg string, args ...any) { t.Errorf("%s %v", msg, args) })
	if err != nil {
		t.Fatal(err)
	}
	second := sys.Root.Spawn(Props(Deps{Store: db, InForce: inForce, Sources: src, Log: log}))
	res, err = sys.Root.RequestFuture(second, &messages.GetSettings{}, 5*time.Second).Result()
	got, ok := res.(*messages.GetSettingsReply)
	if err != nil || !ok || got.Err != nil {
		t.Fatalf("get: %#v %v", res, err)
	}
	for name := range update {
		if got.Settings[name] != inForce[name] || got.Metadata[name].RestartPending {
			t.Errorf("%s after restart: listed %q, restartPending %v; in force %q", name, got.Settings[name], got.Metadata[name].RestartPending, inForce[name])
		}
	}
}
