// Package peertest starts the peer side of a node in-process for tests and
// benchmarks outside actors/peer: identity, ledger.db and node.db in a temp
// dir, a quiet actor system, the real ledger actor, a QUIC endpoint on
// loopback and the real peers supervisor, with timings short enough for
// tests. (actors/peer's own tests keep their harness: importing this
// package from them would be an import cycle.)
package peertest

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/ledger"
	"peerdns/actors/peer"
	"peerdns/internal/applied"
	"peerdns/internal/store"
	"peerdns/internal/view"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// Node is one started peer side. Stop is registered with tb.Cleanup and
// may also be called earlier; it is idempotent.
type Node struct {
	ID       *identity.Identity
	Sys      *actor.ActorSystem
	Ledger   *actor.PID
	Peers    *actor.PID
	Endpoint *transport.QUICEndpoint
	// Mesh is the peers supervisor's Deps.Mesh: hand it to the tunnel
	// layer under test.
	Mesh *peer.Mesh
	Stop func()
}

// Start starts a node that joins with invite (or creates a network when
// invite is ""). tune, when not nil, adjusts the peers supervisor's Deps
// (timings, bootstrap, another Mesh) before it is spawned.
func Start(tb testing.TB, invite string, tune func(*peer.Deps)) *Node {
	tb.Helper()
	dir := tb.TempDir()
	id, err := identity.LoadOrCreate(filepath.Join(dir, "identity.key"))
	if err != nil {
		tb.Fatal(err)
	}
	ldb, err := store.Open(filepath.Join(dir, "ledger.db"), store.Options{Durable: true})
	if err != nil {
		tb.Fatal(err)
	}
	ndb, err := store.Open(filepath.Join(dir, "node.db"), store.Options{Durable: true})
	if err != nil {
		tb.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	av := &applied.Vector{} // as in a node: sessions skip checking ops the ledger holds
	lpid, err := sys.Root.SpawnNamed(ledger.Props(ledger.Deps{
		Identity: id, Ledger: ldb, Node: ndb, Published: &view.Published{}, Join: invite != "", Log: quiet, Applied: av,
	}), "ledger")
	if err != nil {
		tb.Fatal(err)
	}
	ep, err := transport.Listen(transport.Config{Identity: id, ListenAddr: "127.0.0.1:0", Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	deps := peer.Deps{
		Identity: id, Endpoint: ep, Ledger: lpid, Node: ndb, Log: quiet, Join: invite, Mesh: peer.NewMesh(), Applied: av,
		TickInterval: 50 * time.Millisecond, SyncInterval: 500 * time.Millisecond,
		ExchangeInterval: 200 * time.Millisecond,
		Backoff:          transport.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
	}
	if tune != nil {
		tune(&deps)
	}
	ppid, err := sys.Root.SpawnNamed(peer.Props(deps), "peers")
	if err != nil {
		tb.Fatal(err)
	}
	n := &Node{ID: id, Sys: sys, Ledger: lpid, Peers: ppid, Endpoint: ep, Mesh: deps.Mesh}
	stopped := false
	n.Stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = sys.Root.StopFuture(ppid).Wait()
		_ = ep.Close()
		_ = sys.Root.StopFuture(lpid).Wait()
		sys.Shutdown()
		ldb.Close()
		ndb.Close()
	}
	tb.Cleanup(n.Stop)
	return n
}
