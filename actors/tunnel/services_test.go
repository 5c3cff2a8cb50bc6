package tunnel

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// A service's key is written into its domain's claim, which every peer
// reads: the URL of a secure server (its secret) is refused as one,
// whether the server runs on the service's node or on a peer that
// announces it, and never reaches the claim; a non-secure server's URL
// is a service as before.
func TestServiceRefusesSecureKey(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, false)
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	secure := targetOpts(echoServer(t))
	secure.Secure = true
	_, surl := a.createServer(secure)
	_, purl := a.createServer(targetOpts(echoServer(t)))
	k, err := parseClientKey(surl)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if len(b.mesh.Providers(k.Secure)) == 0 {
			return errors.New("b does not see the secure server's id yet")
		}
		return nil
	})
	a.own("a.p2p")
	b.own("b.p2p")
	for _, n := range []*testNode{a, b} {
		domain := "a.p2p"
		if n == b {
			domain = "b.p2p"
		}
		r := ask[*messages.CreateTunnelClientReply](t, n, &messages.CreateTunnelClient{Opts: messages.TunnelClientOpts{
			Domain: domain, Key: surl, Port: freePort(t), ServiceName: "hidden"}})
		if !errors.Is(r.Err, messages.ErrBadTunnel) {
			t.Errorf("%s: service with a secure server's key: id %q, err %v; want ErrBadTunnel", domain, r.ID, r.Err)
		}
	}
	r := ask[*messages.CreateTunnelClientReply](t, b, &messages.CreateTunnelClient{Opts: messages.TunnelClientOpts{
		Domain: "b.p2p", Key: purl, Port: freePort(t), ServiceName: "web"}})
	if r.Err != nil {
		t.Fatalf("service with a non-secure server's key: %v", r.Err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		for _, w := range b.ledger.servicesWritten() {
			if len(w.Services) == 1 && w.Services[0].ServiceName == "web" && sameKey(w.Services[0].Key, purl) {
				return nil
			}
		}
		return fmt.Errorf("services written %+v", b.ledger.servicesWritten())
	})
	secret := strings.TrimPrefix(surl, urlScheme)
	for _, n := range []*testNode{a, b} {
		for _, w := range n.ledger.servicesWritten() {
			for _, s := range w.Services {
				if strings.Contains(strings.ToLower(s.Key), secret) {
					t.Errorf("the secret was written into the claim of %s: %+v", w.Domain, w)
				}
			}
		}
	}
}

// A subscription's id <domain>_<serviceName> does not say where the
// domain ends, as both may hold '_': unsubscribing (a.p2p, x_y) is no
// unsubscribing of (a.p2p_x, y), whose id is the same.
func TestUnsubscribeMatchesDomainAndService(t *testing.T) {
	testutil.NoLeaks(t)
	n := newTestNet(t, false).node(func(d *Deps) { d.ClaimTimeout = 100 * time.Millisecond })
	key := "hs://" + strings.Repeat("ab", 32)
	sub := messages.Subscription{Domain: "a.p2p_x", ServiceName: "y", Key: key, Port: freePort(t)}
	if r := ask[*messages.SubscriptionReply](t, n, &messages.ServiceSubscribe{Sub: sub}); r.Err != nil {
		t.Fatalf("subscribe: %v", r.Err)
	}
	r := ask[*messages.SubscriptionReply](t, n, &messages.ServiceUnsubscribe{Domain: "a.p2p", ServiceName: "x_y"})
	if !errors.Is(r.Err, messages.ErrNotSubscribed) {
		t.Errorf("unsubscribe (a.p2p, x_y): %v; want ErrNotSubscribed", r.Err)
	}
	subs := ask[*messages.GetSubscriptionsReply](t, n, &messages.GetSubscriptions{}).Subscriptions
	if len(subs) != 1 || subs[0].Domain != "a.p2p_x" || subs[0].ServiceName != "y" {
		t.Fatalf("subscriptions %+v; want (a.p2p_x, y) only", subs)
	}
	if r := ask[*messages.SubscriptionReply](t, n, &messages.ServiceUnsubscribe{Domain: "a.p2p_x", ServiceName: "y"}); r.Err != nil {
		t.Fatalf("unsubscribe (a.p2p_x, y): %v", r.Err)
	}
}
