package node

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// claimOnNode is domain's entry in n's GET /api/resolved-domains (the
// resolved claim's record as n's ledger decoded it), or an error while n
// lists no such domain.
func claimOnNode(t *testing.T, n *Node, domain string) (messages.DomainEntry, error) {
	var entries []messages.DomainEntry
	mustJSON(t, "GET", "http://"+n.AdminAddr()+"/api/resolved-domains", "", 200, &entries)
	for _, e := range entries {
		if e.Domain == domain {
			return e, nil
		}
	}
	return messages.DomainEntry{}, fmt.Errorf("no %s on %s", domain, n.ID()[:8])
}

// tunnel-client-create puts the client's id in the clients array of the
// owner's claim record (service or not), every node reads it back, and
// tunnel-client-delete takes it out again.
func TestClaimRecordClients(t *testing.T) {
	a := newTestNode(t, t.TempDir())
	testutil.Eventually(t, 10*time.Second, func() error {
		if code, body := call(t, "GET", "http://"+a.AdminAddr()+"/api/health?probe=readiness", ""); code != 200 {
			return fmt.Errorf("master not ready: %s", body)
		}
		return nil
	})
	b := joinNode(t, a, func(c *Config) { c.InitialIPIndex = 60 })
	nodes := []*Node{a, b}

	_, url := tunnelServerURL(t, a, fmt.Sprintf(`{"port":%d}`, echoServer(t)))
	claimOn(t, a, "cl.p2p", url)
	var plain, svc struct{ ID string }
	mustJSON(t, "POST", "http://"+a.AdminAddr()+"/api/tunnel-client-create",
		fmt.Sprintf(`{"domain":"cl.p2p","key":%q,"port":%d}`, url, freePort(t)), 200, &plain)
	mustJSON(t, "POST", "http://"+a.AdminAddr()+"/api/tunnel-client-create",
		fmt.Sprintf(`{"domain":"cl.p2p","key":%q,"port":%d,"serviceName":"echo"}`, url, freePort(t)), 200, &svc)
	if plain.ID == "" || svc.ID != "cl.p2p_echo" {
		t.Fatalf("client ids %q %q", plain.ID, svc.ID)
	}
	want := []string{plain.ID, svc.ID}
	sort.Strings(want)
	allNodes(t, nodes, func(n *Node) error {
		rec, err := claimOnNode(t, n, "cl.p2p")
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(rec.Clients, want) || rec.Hash != url {
			return fmt.Errorf("claim record %+v, want clients %v and hash %s", rec, want, url)
		}
		if len(rec.Services) != 1 || rec.Services[0].ServiceName != "echo" {
			return fmt.Errorf("services %+v, want echo alone", rec.Services)
		}
		return nil
	})

	// A subscriber's clients are not the owner's: b's subscription does
	// not appear in the claim, and b claims nothing.
	expect(t, b, "POST", "/api/service-subscribe",
		fmt.Sprintf(`{"domain":"cl.p2p","serviceName":"echo","key":%q,"port":%d}`, url, freePort(t)), 200, success)
	runningClient(t, b, "cl.p2p_echo")
	if e, err := claimOnNode(t, b, "cl.p2p"); err != nil || e.IsLocal || !reflect.DeepEqual(e.Clients, want) {
		t.Fatalf("after b subscribed: %+v %v", e, err)
	}

	expect(t, a, "POST", "/api/tunnel-client-delete", fmt.Sprintf(`{"id":%q}`, plain.ID), 200, "OK")
	allNodes(t, nodes, func(n *Node) error {
		rec, err := claimOnNode(t, n, "cl.p2p")
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(rec.Clients, []string{svc.ID}) {
			return fmt.Errorf("clients after delete %v, want [%s]", rec.Clients, svc.ID)
		}
		return nil
	})
}
