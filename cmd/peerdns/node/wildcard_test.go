package node

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Wildcard local records through the admin API, answered over UDP with
// exact names first; a wildcard over a claimed p2p domain is refused
// with a message that says why.
func TestWildcardRecords(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	addDomain(t, base, "site.p2p", hashA)
	mustJSON(t, "POST", base+"/api/add-local-dns", `{"name":"*.dev.lan","type":"A","ttl":60,"data":"10.0.0.1"}`, 200, nil)
	mustJSON(t, "POST", base+"/api/add-local-dns", `{"name":"api.dev.lan","type":"A","ttl":60,"data":"10.0.0.2"}`, 200, nil)

	c := &dns.Client{Timeout: 3 * time.Second}
	for _, tt := range []struct{ name, want string }{
		{"web.dev.lan.", "10.0.0.1"},
		{"a.b.DEV.lan.", "10.0.0.1"},
		{"api.dev.lan.", "10.0.0.2"},
	} {
		m := new(dns.Msg)
		m.SetQuestion(tt.name, dns.TypeA)
		r, _, err := c.Exchange(m, n.dns.Addr())
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(r.Answer) != 1 || !strings.Contains(r.Answer[0].String(), tt.want) || r.Answer[0].Header().Name != tt.name {
			t.Fatalf("%s = %v, want %s owned by the name asked", tt.name, r.Answer, tt.want)
		}
	}

	code, body := call(t, "POST", base+"/api/add-local-dns", `{"name":"*.site.p2p","type":"A","ttl":60,"data":"10.0.0.9"}`)
	if code != 500 || !strings.Contains(body, `would shadow the claimed p2p domain "site.p2p"`) {
		t.Fatalf("wildcard over a claimed domain = %d %q", code, body)
	}
}
