package node

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// joinNode starts a node that joins master's network with tune applied
// to its config, and waits until the two are connected.
func joinNode(t *testing.T, master *Node, tune func(*Config)) *Node {
	t.Helper()
	var inv struct{ Invite string }
	mustJSON(t, "POST", "http://"+master.AdminAddr()+"/api/invites", "", 200, &inv)
	cfg := testConfig(t.TempDir())
	cfg.Join = inv.Invite
	if tune != nil {
		tune(&cfg)
	}
	n, err := Start(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	waitPeer(t, n, master.ID())
	return n
}

// waitPeer waits until n is connected to id.
func waitPeer(t *testing.T, n *Node, id string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		var peers []string
		mustJSON(t, "GET", "http://"+n.AdminAddr()+"/api/peers", "", 200, &peers)
		for _, p := range peers {
			if p == id {
				return nil
			}
		}
		return fmt.Errorf("%s not connected to %s: %v", n.ID()[:8], id[:8], peers)
	})
}

// bannerServer answers every TCP connection with name and a newline,
// then closes it: a client reading through a tunnel learns which server
// it reached.
func bannerServer(t *testing.T, name string) int {
	return serveTCP(t, func(c net.Conn) { _, _ = io.WriteString(c, name+"\n") })
}

// bannerVia reads the banner of the server reached through addr.
func bannerVia(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func servicesOn(t *testing.T, n *Node, domain string) []messages.Service {
	var out []messages.Service
	mustJSON(t, "GET", "http://"+n.AdminAddr()+"/api/domain-services?domain="+domain, "", 200, &out)
	return out
}

func subscriptionsOn(t *testing.T, n *Node) ([]messages.Subscription, []string) {
	var subs []messages.Subscription
	var all []string
	mustJSON(t, "GET", "http://"+n.AdminAddr()+"/api/service-subscriptions", "", 200, &subs)
	mustJSON(t, "GET", "http://"+n.AdminAddr()+"/api/subscribe-all-domains", "", 200, &all)
	return subs, all
}

func clientIDs(t *testing.T, n *Node) []string {
	var cs []messages.TunnelClient
	mustJSON(t, "GET", "http://"+n.AdminAddr()+"/api/tunnel-clients", "", 200, &cs)
	ids := []string{}
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return ids
}

func expect(t *testing.T, n *Node, method, path, body string, want int, wantBody string) {
	t.Helper()
	code, got := call(t, method, "http://"+n.AdminAddr()+path, body)
	if code != want || (wantBody != "" && strings.TrimSpace(got) != wantBody) {
		t.Fatalf("%s %s %s = %d %q, want %d %q", method, path, body, code, got, want, wantBody)
	}
}

const success = `{"success":true}`

// The owner's service clients are listed on every node; a subscriber
// subscribes, unsubscribes, subscribes to all (and picks up a service
// added later), keeps it all over a restart, and unsubscribes from all.
func TestServicesAndSubscriptions(t *testing.T) {
	a := newTestNode(t, t.TempDir())
	testutil.Eventually(t, 10*time.Second, func() error {
		if code, body := call(t, "GET", "http://"+a.AdminAddr()+"/api/health?probe=readiness", ""); code != 200 {
			return fmt.Errorf("master not ready: %s", body)
		}
		return nil
	})
	// The subscriber hands out local IPs from elsewhere in the loopback
	// range than the owner, so both can listen on a service's port on
	// one machine.
	b := joinNode(t, a, func(c *Config) { c.InitialIPIndex = 60 })
	c := joinNode(t, a, nil)
	nodes := []*Node{a, b, c}
	for _, n := range nodes[1:] {
		waitPeer(t, a, n.ID())
	}
	waitPeer(t, b, c.ID())

	// The owner: a tunnel server, the domain claimed with it, a service.
	_, url1 := tunnelServerURL(t, a, fmt.Sprintf(`{"port":%d}`, echoServer(t)))
	claimOn(t, a, "svc.p2p", url1)
	port1 := freePort(t)
	var cl struct{ ID string }
	mustJSON(t, "POST", "http://"+a.AdminAddr()+"/api/tunnel-client-create",
		fmt.Sprintf(`{"domain":"svc.p2p","key":%q,"port":%d,"serviceName":"echo"}`, url1, port1), 200, &cl)
	if cl.ID != "svc.p2p_echo" {
		t.Fatalf("service client id %q", cl.ID)
	}
	echo := messages.Service{ServiceName: "echo", Key: url1, Port: port1, Protocol: "tcp"}
	allNodes(t, nodes, func(n *Node) error {
		if got := servicesOn(t, n, "svc.p2p"); !reflect.DeepEqual(got, []messages.Service{echo}) {
			return fmt.Errorf("services on %s: %+v", n.ID()[:8], got)
		}
		return nil
	})
	for _, n := range nodes {
		expect(t, n, "GET", "/api/domain-services", "", 400, "")
		if got := servicesOn(t, n, "nothing.p2p"); len(got) != 0 {
			t.Fatalf("services of an unknown domain: %+v", got)
		}
	}

	// Subscribe: bad input, success, conflict; traffic goes through.
	portB := freePort(t)
	for _, body := range []string{
		fmt.Sprintf(`{"serviceName":"echo","key":%q,"port":%d}`, url1, portB),
		fmt.Sprintf(`{"domain":"svc.p2p","key":%q,"port":%d}`, url1, portB),
		fmt.Sprintf(`{"domain":"svc.p2p","serviceName":"echo","port":%d}`, portB),
		fmt.Sprintf(`{"domain":"svc.p2p","serviceName":"echo","key":%q}`, url1),
		fmt.Sprintf(`{"domain":"svc.p2p","serviceName":"echo","key":"hs://nope","port":%d}`, portB),
		fmt.Sprintf(`{"domain":"svc.p2p","serviceName":"echo","key":%q,"port":70000}`, url1),
	} {
		expect(t, b, "POST", "/api/service-subscribe", body, 400, "")
	}
	sub := fmt.Sprintf(`{"domain":"svc.p2p","serviceName":"echo","key":%q,"port":%d}`, url1, portB)
	expect(t, b, "POST", "/api/service-subscribe", sub, 200, success)
	expect(t, b, "POST", "/api/service-subscribe", sub, 409, "")
	subs, all := subscriptionsOn(t, b)
	want := messages.Subscription{Domain: "svc.p2p", ServiceName: "echo", Key: url1, Port: portB, Protocol: "tcp"}
	if !reflect.DeepEqual(subs, []messages.Subscription{want}) || len(all) != 0 {
		t.Fatalf("subscriptions %+v, subscribe-all %v", subs, all)
	}
	addr := runningClient(t, b, "svc.p2p_echo")
	testutil.Eventually(t, 20*time.Second, func() error { return echoThrough(addr, 64<<10) })

	// Unsubscribe.
	expect(t, b, "POST", "/api/service-unsubscribe", `{"domain":"svc.p2p"}`, 400, "")
	expect(t, b, "POST", "/api/service-unsubscribe", `{"domain":"svc.p2p","serviceName":"nope"}`, 404, "")
	expect(t, b, "POST", "/api/service-unsubscribe", `{"domain":"svc.p2p","serviceName":"echo"}`, 200, success)
	expect(t, b, "POST", "/api/service-unsubscribe", `{"domain":"svc.p2p","serviceName":"echo"}`, 404, "")
	if subs, _ := subscriptionsOn(t, b); len(subs) != 0 {
		t.Fatalf("subscriptions after unsubscribe: %+v", subs)
	}
	if ids := clientIDs(t, b); len(ids) != 0 {
		t.Fatalf("clients after unsubscribe: %v", ids)
	}
	// The owner cannot subscribe to its own service: the id is its service's.
	expect(t, a, "POST", "/api/service-subscribe", fmt.Sprintf(`{"domain":"svc.p2p","serviceName":"echo","key":%q,"port":%d}`, url1, freePort(t)), 409, "")

	// Subscribe to all, then a service added later.
	expect(t, b, "POST", "/api/subscribe-all", `{}`, 400, "")
	expect(t, b, "POST", "/api/subscribe-all", `{"domain":"svc.p2p"}`, 200, success)
	if _, all := subscriptionsOn(t, b); !reflect.DeepEqual(all, []string{"svc.p2p"}) {
		t.Fatalf("subscribe-all domains %v", all)
	}
	addr = runningClient(t, b, "svc.p2p_echo")
	if !strings.HasSuffix(addr, fmt.Sprintf(":%d", port1)) {
		t.Fatalf("subscribe-all client listens on %s, want the service's port %d", addr, port1)
	}
	testutil.Eventually(t, 20*time.Second, func() error { return echoThrough(addr, 64<<10) })

	_, url2 := tunnelServerURL(t, a, fmt.Sprintf(`{"port":%d}`, bannerServer(t, "two")))
	port2 := freePort(t)
	mustJSON(t, "POST", "http://"+a.AdminAddr()+"/api/tunnel-client-create",
		fmt.Sprintf(`{"domain":"svc.p2p","key":%q,"port":%d,"serviceName":"banner"}`, url2, port2), 200, &cl)
	addr2 := runningClient(t, b, "svc.p2p_banner")
	testutil.Eventually(t, 20*time.Second, func() error {
		got, err := bannerVia(addr2)
		if err == nil && got != "two" {
			err = fmt.Errorf("banner %q", got)
		}
		return err
	})

	// The subscriber restarts: subscriptions, subscribe-all and their
	// clients are back.
	subsBefore, _ := subscriptionsOn(t, b)
	if len(subsBefore) != 2 {
		t.Fatalf("subscriptions before restart: %+v", subsBefore)
	}
	cfg := b.cfg
	cfg.Join = ""
	cfg.P2PAddr = b.endpoint.Addr().String()
	cfg.Bootstrap = []string{a.endpoint.Addr().String()}
	b.Stop()
	b2, err := Start(cfg, io.Discard)
	if err != nil {
		t.Fatalf("restart B: %v", err)
	}
	t.Cleanup(b2.Stop)
	subsAfter, allAfter := subscriptionsOn(t, b2)
	if !reflect.DeepEqual(subsAfter, subsBefore) || !reflect.DeepEqual(allAfter, []string{"svc.p2p"}) {
		t.Fatalf("after restart: subscriptions %+v (before %+v), subscribe-all %v", subsAfter, subsBefore, allAfter)
	}
	addr = runningClient(t, b2, "svc.p2p_echo")
	testutil.Eventually(t, 60*time.Second, func() error { return echoThrough(addr, 64<<10) })
	addr2 = runningClient(t, b2, "svc.p2p_banner")
	testutil.Eventually(t, 20*time.Second, func() error {
		_, err := bannerVia(addr2)
		return err
	})

	// The owner deletes a service: it leaves the claim everywhere.
	expect(t, a, "POST", "/api/tunnel-client-delete", `{"id":"svc.p2p_banner"}`, 200, "OK")
	allNodes(t, []*Node{a, b2, c}, func(n *Node) error {
		if got := servicesOn(t, n, "svc.p2p"); !reflect.DeepEqual(got, []messages.Service{echo}) {
			return fmt.Errorf("services on %s: %+v", n.ID()[:8], got)
		}
		return nil
	})

	// Unsubscribe from all.
	expect(t, b2, "POST", "/api/unsubscribe-all", `{}`, 400, "")
	expect(t, b2, "POST", "/api/unsubscribe-all", `{"domain":"svc.p2p"}`, 200, success)
	if subs, all := subscriptionsOn(t, b2); len(subs) != 0 || len(all) != 0 {
		t.Fatalf("after unsubscribe-all: %+v %v", subs, all)
	}
	if ids := clientIDs(t, b2); len(ids) != 0 {
		t.Fatalf("clients after unsubscribe-all: %v", ids)
	}
}

// A client of a domain follows the claim in force: a rewritten claim
// (new resolved hash), restart-tunnel-clients-for-domain, and the hash
// preference of a lost claim switching between local and resolved.
func TestClientsFollowConsensus(t *testing.T) {
	nodes := newNetwork(t, 2)
	a, b := nodes[0], nodes[1]
	_, url1 := tunnelServerURL(t, a, fmt.Sprintf(`{"port":%d}`, bannerServer(t, "one")))
	_, url2 := tunnelServerURL(t, a, fmt.Sprintf(`{"port":%d}`, bannerServer(t, "two")))
	reaches := func(addr, want string) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, func() error {
			got, err := bannerVia(addr)
			if err == nil && got != want {
				err = fmt.Errorf("reached %q, want %q", got, want)
			}
			return err
		})
	}

	// The resolved hash changes: B rewrites its claim.
	claimOn(t, b, "flip.p2p", url1)
	var cl struct{ ID string }
	mustJSON(t, "POST", "http://"+b.AdminAddr()+"/api/tunnel-client-create",
		fmt.Sprintf(`{"domain":"flip.p2p","key":%q,"port":%d}`, url1, freePort(t)), 200, &cl)
	addr := runningClient(t, b, cl.ID)
	reaches(addr, "one")
	addDomain(t, "http://"+b.AdminAddr(), "flip.p2p", url2)
	reaches(addr, "two")
	var cs []messages.TunnelClient
	mustJSON(t, "GET", "http://"+b.AdminAddr()+"/api/tunnel-clients", "", 200, &cs)
	if len(cs) != 1 || cs[0].Opts.Key != url2 {
		t.Fatalf("client after the claim changed: %+v", cs)
	}

	// Restart the clients of the domain.
	expect(t, b, "POST", "/api/restart-tunnel-clients-for-domain", `{"domain":"flip.p2p"}`, 200, "OK")
	expect(t, b, "POST", "/api/restart-tunnel-clients-for-domain", `{}`, 500, "")
	reaches(runningClient(t, b, cl.ID), "two")

	// A claims pref.p2p first; B's later claim loses. B may make a client
	// for it only while its preference is local, and the client follows
	// the preference.
	claimOn(t, a, "pref.p2p", url1)
	addDomain(t, "http://"+b.AdminAddr(), "pref.p2p", url2)
	testutil.Eventually(t, 20*time.Second, func() error {
		cs := consensusOn(t, b, "pref.p2p")
		if cs.Status != "resolved" || cs.ResolvedClaimant == nil || *cs.ResolvedClaimant != a.ID() {
			return fmt.Errorf("pref.p2p on B: %+v", cs)
		}
		return nil
	})
	body := fmt.Sprintf(`{"domain":"pref.p2p","key":%q,"port":%d}`, url2, freePort(t))
	expect(t, b, "POST", "/api/tunnel-client-create", body, 400, "")
	expect(t, b, "POST", "/api/update-hash-preference", `{"domain":"pref.p2p","preference":"local"}`, 200, "OK")
	mustJSON(t, "POST", "http://"+b.AdminAddr()+"/api/tunnel-client-create", body, 200, &cl)
	addr = runningClient(t, b, cl.ID)
	reaches(addr, "two")
	expect(t, b, "POST", "/api/update-hash-preference", `{"domain":"pref.p2p","preference":"resolved"}`, 200, "OK")
	reaches(addr, "one")
	expect(t, b, "POST", "/api/update-hash-preference", `{"domain":"pref.p2p","preference":"local"}`, 200, "OK")
	reaches(addr, "two")

	// After a restart B's client still follows its preference.
	cfg := b.cfg
	cfg.Join = ""
	cfg.P2PAddr = b.endpoint.Addr().String()
	cfg.Bootstrap = []string{a.endpoint.Addr().String()}
	b.Stop()
	b2, err := Start(cfg, io.Discard)
	if err != nil {
		t.Fatalf("restart B: %v", err)
	}
	t.Cleanup(b2.Stop)
	reaches(runningClient(t, b2, cl.ID), "two")
	expect(t, b2, "POST", "/api/update-hash-preference", `{"domain":"pref.p2p","preference":"resolved"}`, 200, "OK")
	reaches(runningClient(t, b2, cl.ID), "one")
}
