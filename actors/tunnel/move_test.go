package tunnel

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// replyProbe is a PID whose messages are taken as they are sent (a
// process of its own in the registry, no mailbox): a test can tell
// whether a reply was sent by some point without waiting for it.
type replyProbe struct{ got chan any }

func (p *replyProbe) SendUserMessage(_ *actor.PID, m any) { p.got <- actor.UnwrapEnvelopeMessage(m) }
func (p *replyProbe) SendSystemMessage(*actor.PID, any)   {}
func (p *replyProbe) Stop(*actor.PID)                     {}

func newReplyProbe(t testing.TB, sys *actor.ActorSystem) (*replyProbe, *actor.PID) {
	p := &replyProbe{got: make(chan any, 8)}
	pid, _ := sys.ProcessRegistry.Add(p, "probe"+sys.ProcessRegistry.NextId())
	t.Cleanup(func() { sys.ProcessRegistry.Remove(pid) })
	return p, pid
}

// A client deleted or restarted while it is being moved onto a new key
// (the actor of its old key still stopping) is answered once that actor
// stopped, as a client that is not moving is: by then its port is free.
func TestMovingClientAnswersOnceOldActorStopped(t *testing.T) {
	for _, op := range []string{"delete", "restart"} {
		t.Run(op, func(t *testing.T) {
			testutil.NoLeaks(t)
			n := newTestNet(t, false).node(nil)
			_, k1 := n.createServer(targetOpts(echoServer(t)))
			k2 := urlScheme + strings.Repeat("cd", 32)
			const domain = "moving.p2p"
			n.own(domain)
			n.ledger.setTarget(messages.DomainTarget{Domain: domain, Services: []messages.Service{{ServiceName: "web", Key: k1}}})
			port := freePort(t)
			if r := ask[*messages.SubscriptionReply](t, n, &messages.ServiceSubscribe{Sub: messages.Subscription{
				Domain: domain, ServiceName: "web", Key: k1, Port: port}}); r.Err != nil {
				t.Fatal(r.Err)
			}
			id := domain + "_web"
			addr := n.waitClient(id, messages.TunnelRunning)

			// Hold the client's actor inside a restart (a slow hint
			// subscriber), so the stop of a move waits behind it.
			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			sub := n.sys.EventStream.Subscribe(func(ev any) {
				h, ok := ev.(*messages.Hint)
				if !ok || h.Type != messages.HintTunnelLog {
					return
				}
				if h.Data["id"] == id && strings.HasPrefix(fmt.Sprint(h.Data["message"]), "tunnel client restarted") {
					once.Do(func() { close(entered); <-release })
				}
			})
			defer n.sys.EventStream.Unsubscribe(sub)
			var freeOnce sync.Once
			free := func() { freeOnce.Do(func() { close(release) }) }
			defer free()
			n.sys.Root.Send(n.pid, &messages.RestartTunnelClient{ID: id})
			select {
			case <-entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the client's restart did not log")
			}
			n.ledger.setTarget(messages.DomainTarget{Domain: domain, Services: []messages.Service{{ServiceName: "web", Key: k2}}})
			n.sys.Root.Send(n.pid, &messages.RestartDomainClients{Domain: domain})
			testutil.Eventually(t, 5*time.Second, func() error {
				if key := n.client(id).Opts.Key; !sameKey(key, k2) {
					return fmt.Errorf("client key %s, not moved yet", key)
				}
				return nil
			})

			probe, ppid := newReplyProbe(t, n.sys)
			var req any = &messages.DeleteTunnelClient{ID: id}
			if op == "restart" {
				req = &messages.RestartTunnelClient{ID: id}
			}
			n.sys.Root.RequestWithCustomSender(n.pid, req, ppid)
			ask[*messages.GetTunnelClientsReply](t, n, &messages.GetTunnelClients{}) // req was handled before it
			select {
			case m := <-probe.got:
				t.Fatalf("%s answered (%T) while the actor of the old key still ran", op, m)
			default:
			}
			free()
			select {
			case m := <-probe.got:
				if r, ok := m.(*messages.TunnelWriteReply); !ok || r.Err != nil {
					t.Fatalf("%s: %#v", op, m)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s not answered", op)
			}
			if op == "delete" {
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					t.Fatalf("the deleted client's port: %v", err)
				}
				ln.Close()
			}
		})
	}
}

// A server shows running (the tunnel-log line and the hint a panel
// lists again on) only once the supervisor dispatches streams to it and
// announced it, not as soon as its actor started.
func TestServerRunningOnceAnnounced(t *testing.T) {
	testutil.NoLeaks(t)
	n := newTestNet(t, false).node(nil)
	// The supervisor is held in the create, its server's actor not.
	entered, release := make(chan struct{}), make(chan struct{})
	var once, freeOnce sync.Once
	free := func() { freeOnce.Do(func() { close(release) }) }
	defer free()
	var mu sync.Mutex
	var running []string // each "tunnel server running" line, with what was announced then
	sub := n.sys.EventStream.Subscribe(func(ev any) {
		h, ok := ev.(*messages.Hint)
		if !ok || h.Type != messages.HintTunnelLog {
			return
		}
		msg := fmt.Sprint(h.Data["message"])
		switch {
		case strings.HasPrefix(msg, "tunnel server created"):
			once.Do(func() { close(entered); <-release })
		case strings.HasPrefix(msg, "tunnel server running"):
			mu.Lock()
			running = append(running, fmt.Sprintf("%s (announced %v)", msg, n.mesh.Announced()))
			mu.Unlock()
		}
	})
	defer n.sys.EventStream.Unsubscribe(sub)
	opts := targetOpts(echoServer(t))
	opts.Domain = "served.p2p"
	f := n.sys.Root.RequestFuture(n.pid, &messages.CreateTunnelServer{Opts: opts}, 10*time.Second)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the create did not log")
	}
	// The server's actor started: it claims the domain last.
	testutil.Eventually(t, 5*time.Second, func() error {
		if n.ledger.claim("served.p2p") == "" {
			return fmt.Errorf("the server's actor has not started")
		}
		return nil
	})
	free()
	res, err := f.Result()
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*messages.CreateTunnelServerReply).ID
	testutil.Eventually(t, 5*time.Second, func() error {
		if st := n.server(id).Info.State; st != messages.TunnelRunning {
			return fmt.Errorf("state %q", st)
		}
		return nil
	})
	announced := n.mesh.Announced()
	mu.Lock()
	defer mu.Unlock()
	if len(announced) != 1 || len(running) == 0 {
		t.Fatalf("announced %v, running lines %q", announced, running)
	}
	for _, l := range running {
		if !strings.Contains(l, "announced="+announced[0]+" (announced ["+announced[0]+"])") {
			t.Errorf("server running before it was announced: %s", l)
		}
	}
}
