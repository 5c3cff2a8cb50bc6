package node

import (
	"crypto/tls"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// DNS over TLS with a miekg/dns client that verifies the admin domain's
// certificate against the node's CA; a client that does not trust the
// CA fails the handshake.
func TestDoT(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.DoTAddr = "127.0.0.1:0"
	n, err := Start(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	base := "http://" + n.AdminAddr()
	mustJSON(t, "POST", base+"/api/add-local-dns", `{"name":"nas.lan","type":"A","ttl":60,"data":"192.168.1.20"}`, 200, nil)
	addr := n.dns.TLSAddr()
	if addr == "" {
		t.Fatal("no DoT address")
	}
	c := &dns.Client{Net: "tcp-tls", Timeout: 5 * time.Second,
		TLSConfig: &tls.Config{RootCAs: n.CA().Pool(), ServerName: "admin.p2p"}}
	conn, err := c.Dial(addr)
	if err != nil {
		t.Fatalf("dial DoT: %v", err)
	}
	defer conn.Close()
	// Two queries on one connection (RFC 7858 §3.4: reuse).
	for _, name := range []string{"nas.lan.", "NAS.lan."} {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		r, _, err := c.ExchangeWithConn(m, conn)
		if err != nil {
			t.Fatalf("DoT %s: %v", name, err)
		}
		if len(r.Answer) != 1 || !strings.Contains(r.Answer[0].String(), "192.168.1.20") {
			t.Fatalf("DoT %s = %v", name, r.Answer)
		}
	}
	if got := conn.Conn.(*tls.Conn).ConnectionState().NegotiatedProtocol; got != "" && got != "dot" {
		t.Errorf("ALPN = %q", got)
	}

	bad := &dns.Client{Net: "tcp-tls", Timeout: 5 * time.Second, TLSConfig: &tls.Config{ServerName: "admin.p2p"}}
	m := new(dns.Msg)
	m.SetQuestion("nas.lan.", dns.TypeA)
	if _, _, err := bad.Exchange(m, addr); err == nil {
		t.Fatal("a client without the node's CA got an answer")
	}
}
