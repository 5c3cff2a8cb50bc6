package admin

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// quietSystem is an actor system that logs nothing, shut down when the
// test ends, and the quiet logger for the server.
func quietSystem(t *testing.T) (*actor.ActorSystem, *slog.Logger) {
	quiet := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	return sys, quiet
}

// stubLedger stands in for the ledger: it answers a message with
// reply(message), delay later (at once when 0), and never when reply
// gives nil.
func stubLedger(t *testing.T, sys *actor.ActorSystem, delay time.Duration, reply func(msg any) any) *actor.PID {
	t.Helper()
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		r := reply(c.Message())
		switch {
		case r == nil:
		case delay == 0:
			c.Respond(r)
		default:
			to := c.Sender()
			time.AfterFunc(delay, func() { sys.Root.Send(to, r) })
		}
	}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	return pid
}

// A change of a domain waits for the ledger longer than a read does: a
// ledger slower than the read bound still gets its add-domain answered
// with 200, where a read gets 500.
func TestWriteWaitsForASlowLedger(t *testing.T) {
	sys, quiet := quietSystem(t)
	// A ledger 300 ms behind, as one far behind its peers' ops is.
	ledger := stubLedger(t, sys, 300*time.Millisecond, func(msg any) any {
		switch msg.(type) {
		case *messages.AddDomain:
			return &messages.AddDomainReply{}
		case *messages.GetDomains:
			return &messages.GetDomainsReply{JSON: []byte("[]")}
		}
		return nil
	})
	s := New(Deps{Root: sys.Root, Ledger: ledger, Peers: fakePeers{healthy: true}, Started: time.Now(), Log: quiet})
	s.askTimeout, s.writeAskTimeout = 100*time.Millisecond, 5*time.Second
	addr := serveServer(t, s)

	code, body := testutil.Call(t, "POST", "http://"+addr+"/api/add-domain", `{"domain":"slow.p2p","hash":"hs://00"}`)
	if code != 200 {
		t.Fatalf("add-domain through a ledger 300 ms slow, write bound 5 s: %d %s, want 200", code, body)
	}
	code, body = testutil.Call(t, "GET", "http://"+addr+"/api/resolved-domains", "")
	if code != 500 {
		t.Fatalf("resolved-domains through a ledger 300 ms slow, read bound 100 ms: %d %s, want 500", code, body)
	}
	if s := New(Deps{Root: sys.Root, Log: quiet}); s.writeAskTimeout != WriteAskTimeout || s.writeAskTimeout <= s.askTimeout || s.writeAskTimeout >= writeTimeout {
		t.Fatalf("bounds: write %v, read %v, response write %v; want read < write < response write", s.writeAskTimeout, s.askTimeout, writeTimeout)
	}
}
