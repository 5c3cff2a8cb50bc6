package peer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/ledger"
	"peerdns/internal/applied"
	"peerdns/internal/store"
	"peerdns/internal/testutil"
	"peerdns/internal/view"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// TestFirstVectorGetsFreshOpsToo: a repair leaves out the ops that
// reached us within the freshness window (they are on their way to the
// peer through the tree), but a session's first vector gets everything:
// the peer has only just joined the tree, and ops we applied before its
// session came up are pushed to it by nobody. Here our ledger is seconds
// behind (the window is a whole sync interval) and the peer's first
// vector, empty, is answered with every op of ours, the ones our
// sessions verified a moment ago included. A real session and ledger on
// the in-memory transport; the test is the peer, and the session's
// parent stands in for the supervisor (it sends no ticks, so nothing
// but the first vector brings ops).
func TestFirstVectorGetsFreshOpsToo(t *testing.T) {
	checkLeaks(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	us, _ := identity.Generate()
	them, _ := identity.Generate()
	ldb, err := store.Open(filepath.Join(dir, "ledger.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ldb.Close()
	ndb, err := store.Open(filepath.Join(dir, "node.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ndb.Close()
	sys := quietSystem()
	defer sys.Shutdown()
	vec := &applied.Vector{}
	led, err := sys.Root.SpawnNamed(ledger.Props(ledger.Deps{Identity: us, Ledger: ldb, Node: ndb, Published: &view.Published{}, Applied: vec, Log: quiet}), "ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sys.Root.StopFuture(led).Wait() }()
	var net *messages.GetNetworkReply
	testutil.Eventually(t, 10*time.Second, func() error {
		if net = ask[*messages.GetNetworkReply](t, sys, led, &messages.GetNetwork{}); net.Key == "" {
			return errors.New("the ledger made no network yet")
		}
		return nil
	})
	if r := ask[*messages.AddWriterReply](t, sys, led, &messages.AddWriter{ID: them.ID()}); r.Err != nil {
		t.Fatal(r.Err)
	}
	held := ask[*messages.GetVersionVectorReply](t, sys, led, &messages.GetVersionVector{}).VV[us.ID()]
	if held < 2 {
		t.Fatalf("the ledger holds %d ops of ours, want the genesis and the new writer", held)
	}

	mem := transport.NewMemNetwork()
	epUs, epThem := mem.Listen(us, quiet), mem.Listen(them, quiet)
	defer epUs.Close()
	defer epThem.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := epUs.Dial(ctx, epThem.Addr().String(), them.ID())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := epThem.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Our ledger is seconds behind, and our sessions verified our ops a
	// moment ago (as when they came back to us over the network).
	var lag ledgerLag
	for range 200 {
		lag.observe(10 * time.Second)
	}
	var checked applied.Checked
	for seq := uint64(1); seq <= held; seq++ {
		checked.Add(us.ID(), seq, [32]byte{}, time.Now())
	}
	var superseded atomic.Bool
	cfg := sessionConfig{
		conn: conn, superseded: &superseded, ledger: led, log: quiet, now: time.Now,
		hello:        messages.Hello{ID: us.ID(), Network: net.Key, Root: net.Root},
		syncInterval: 3 * time.Second, pingInterval: time.Second, handshakeTimeout: 5 * time.Second, askTimeout: 5 * time.Second,
		batch: 8, queueSize: 256, mesh: NewMesh(), applied: vec, checked: &checked, lazyTimeout: time.Second,
		grafts: &graftBook{}, lag: &lag,
	}
	parent := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actor.Started); ok {
			c.Spawn(sessionProps(cfg))
		}
	}))
	defer func() { _ = sys.Root.StopFuture(parent).Wait() }()

	peer.Send(&messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: them.ID(), Network: net.Key, Root: net.Root}})
	peer.Send(&messages.Envelope{Kind: messages.KindAccept, Accept: &messages.Accept{}})
	peer.Send(&messages.Envelope{Kind: messages.KindVV, VV: messages.VersionVector{}})
	got := uint64(0)
	for got < held {
		done := make(chan struct{})
		timer := time.AfterFunc(5*time.Second, func() { close(done); _ = peer.Close("test over") })
		m, err := peer.Recv()
		if !timer.Stop() {
			<-done
		}
		if err != nil {
			t.Fatalf("our first vector, empty, brought %d of our %d ops (a session's first vector gets everything): %v", got, held, err)
		}
		if m.Kind != messages.KindOps {
			continue
		}
		for _, op := range m.Ops {
			if op.Writer == us.ID() && op.Seq == got+1 {
				got++
			}
		}
	}
}
