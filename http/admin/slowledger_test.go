package admin

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// slowLedger answers add-domain and the domain listing after delay, as
// a ledger far behind its peers' ops does.
func slowLedger(t *testing.T, sys *actor.ActorSystem, delay time.Duration) *actor.PID {
	t.Helper()
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		var reply any
		switch c.Message().(type) {
		case *messages.AddDomain:
			reply = &messages.AddDomainReply{}
		case *messages.GetDomains:
			reply = &messages.GetDomainsReply{JSON: []byte("[]")}
		default:
			return
		}
		to := c.Sender()
		time.AfterFunc(delay, func() { sys.Root.Send(to, reply) })
	}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	return pid
}

// A change of a domain waits for the ledger longer than a read does: a
// ledger slower than the read bound still gets its add-domain answered
// with 200, where a read gets 500.
func TestWriteWaitsForASlowLedger(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	s := New(Deps{Root: sys.Root, Ledger: slowLedger(t, sys, 300*time.Millisecond), Peers: fakePeers{healthy: true}, Started: time.Now(), Log: quiet})
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
