package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"

	"peerdns/internal/testutil"
)

// POST /api/dns-query-log turns the per-client counters on; GET
// /api/dns-clients shows them; bad bodies are 400.
func TestDNSClientsEndpoints(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	var got struct {
		QueryLog bool `json:"queryLog"`
		Clients  []struct {
			Client  string `json:"client"`
			Queries int64  `json:"queries"`
		} `json:"clients"`
	}
	mustJSON(t, "GET", base+"/api/dns-clients", "", 200, &got)
	if got.QueryLog || len(got.Clients) != 0 {
		t.Fatalf("before: %+v", got)
	}
	mustJSON(t, "POST", base+"/api/add-local-dns", `{"name":"nas.lan","type":"A","ttl":60,"data":"192.168.1.20"}`, 200, nil)
	if code, body := call(t, "POST", base+"/api/dns-query-log", `{"enabled":true}`); code != 200 {
		t.Fatalf("enable: %d %s", code, body)
	}
	c := &dns.Client{Timeout: 3 * time.Second}
	for i := 0; i < 3; i++ {
		if _, _, err := c.Exchange(new(dns.Msg).SetQuestion("nas.lan.", dns.TypeA), n.dns.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		mustJSON(t, "GET", base+"/api/dns-clients", "", 200, &got)
		if !got.QueryLog || len(got.Clients) != 1 || got.Clients[0].Client != "127.0.0.1" || got.Clients[0].Queries != 3 {
			return fmt.Errorf("clients %+v", got)
		}
		return nil
	})
	for _, body := range []string{`{}`, `{"enabled":"yes"}`} {
		if code, _ := call(t, "POST", base+"/api/dns-query-log", body); code != 400 {
			t.Errorf("POST %s = %d, want 400", body, code)
		}
	}
	if code, _ := call(t, "GET", base+"/api/dns-clients?limit=-1", ""); code != 400 {
		t.Errorf("limit=-1 = %d, want 400", code)
	}
	// The DNS_QUERY_LOG setting turns it off live.
	if code, body := call(t, "POST", base+"/api/update-settings", `{"settings":{"DNS_QUERY_LOG":"false"}}`); code != 200 {
		t.Fatalf("update-settings: %d %s", code, body)
	}
	if n.dns.QueryLogEnabled() {
		t.Fatal("DNS_QUERY_LOG=false left the query log on")
	}
}
