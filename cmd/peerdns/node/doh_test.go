package node

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// dohQuery is a packed query for (name, qtype) with EDNS0.
func dohQuery(t testing.TB, name string, qtype uint16) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.Id = 0 // RFC 8484 §4.1: 0 makes answers cacheable by HTTP caches
	m.SetEdns0(1232, false)
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dohDo(t testing.TB, c *http.Client, req *http.Request) (int, *dns.Msg, http.Header, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != 200 {
		return resp.StatusCode, nil, resp.Header, buf.String()
	}
	m := new(dns.Msg)
	if err := m.Unpack(buf.Bytes()); err != nil {
		t.Fatalf("unpack DoH answer: %v", err)
	}
	return resp.StatusCode, m, resp.Header, ""
}

// DoH at https://admin.p2p/dns-query through the edge proxy, verified
// against the node's CA: GET and POST answer a local record and a p2p
// domain with Cache-Control from the TTL; bad input gets RFC 8484's
// statuses; a browser-like cross-site request still gets its answer.
func TestDoHThroughEdge(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	mustJSON(t, "POST", base+"/api/add-local-dns", `{"name":"nas.lan","type":"A","ttl":120,"data":"192.168.1.20"}`, 200, nil)
	addDomain(t, base, "site.p2p", hashA)

	_, httpsAddr := n.EdgeAddrs()
	secure := edgeClient(httpsAddr, n.CA().Pool())
	url := "https://admin.p2p/dns-query"

	get := func(q []byte) *http.Request {
		req, _ := http.NewRequest("GET", url+"?dns="+base64.RawURLEncoding.EncodeToString(q), nil)
		req.Header.Set("Accept", "application/dns-message")
		return req
	}
	post := func(q []byte, ct string) *http.Request {
		req, _ := http.NewRequest("POST", url, bytes.NewReader(q))
		req.Header.Set("Content-Type", ct)
		return req
	}
	for _, tt := range []struct {
		name string
		req  *http.Request
		want string
		ttl  string
	}{
		{"GET local record", get(dohQuery(t, "nas.lan", dns.TypeA)), "192.168.1.20", "max-age=120"},
		{"POST local record", post(dohQuery(t, "NAS.lan", dns.TypeA), "application/dns-message"), "192.168.1.20", "max-age=120"},
		{"POST p2p domain", post(dohQuery(t, "www.site.p2p", dns.TypeA), "application/dns-message"), "127.77.", "max-age=30"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, m, hdr, body := dohDo(t, secure, tt.req)
			if code != 200 {
				t.Fatalf("status %d %q", code, body)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/dns-message" {
				t.Errorf("Content-Type = %q", ct)
			}
			if cc := hdr.Get("Cache-Control"); cc != tt.ttl {
				t.Errorf("Cache-Control = %q, want %q", cc, tt.ttl)
			}
			// AA only inside the zones the node holds (dns/zone/apex.go).
			if len(m.Answer) != 1 || !strings.Contains(m.Answer[0].String(), tt.want) || m.Authoritative != strings.Contains(tt.name, "p2p") {
				t.Fatalf("answer = %v (AA %v), want %s", m.Answer, m.Authoritative, tt.want)
			}
		})
	}

	big := make([]byte, 70000)
	for _, tt := range []struct {
		name string
		req  *http.Request
		want int
	}{
		{"GET without dns", func() *http.Request { r, _ := http.NewRequest("GET", url, nil); return r }(), 400},
		{"GET not base64url", func() *http.Request { r, _ := http.NewRequest("GET", url+"?dns=ab+c/d!", nil); return r }(), 400},
		{"GET not a query", get([]byte{1, 2, 3}), 400},
		{"POST a response", post(func() []byte { q := dohQuery(t, "nas.lan", dns.TypeA); q[2] |= 0x80; return q }(), "application/dns-message"), 400},
		{"POST JSON", post(dohQuery(t, "nas.lan", dns.TypeA), "application/json"), 415},
		{"POST no type", post(dohQuery(t, "nas.lan", dns.TypeA), ""), 415},
		{"POST too big", post(big, "application/dns-message"), 413},
		{"PUT", func() *http.Request { r, _ := http.NewRequest("PUT", url, nil); return r }(), 405},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, hdr, body := dohDo(t, secure, tt.req)
			if code != tt.want {
				t.Fatalf("status %d %q, want %d", code, body, tt.want)
			}
			if allow := hdr.Get("Allow"); code == 405 && allow != "GET, HEAD, POST" {
				t.Fatalf("405 with Allow %q, want the methods DoH takes", allow)
			}
			if strings.Count(body, "not a DNS query") > 1 {
				t.Fatalf("message %q says the same thing twice", body)
			}
		})
	}

	// A browser's secure-DNS request may carry another site's Origin:
	// DoH answers it, while the rest of the admin API still refuses.
	req := post(dohQuery(t, "nas.lan", dns.TypeA), "application/dns-message")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if code, m, _, body := dohDo(t, secure, req); code != 200 || len(m.Answer) != 1 {
		t.Fatalf("cross-site DoH: %d %q", code, body)
	}
	req, _ = http.NewRequest("GET", "https://admin.p2p/api/health", nil)
	req.Header.Set("Origin", "https://evil.example")
	if code, _, _, _ := dohDo(t, secure, req); code != 403 {
		t.Fatalf("cross-site /api/health = %d, want 403", code)
	}
	// The admin address itself serves DoH too (plain HTTP, loopback).
	req, _ = http.NewRequest("POST", base+"/dns-query", bytes.NewReader(dohQuery(t, "nas.lan", dns.TypeA)))
	req.Header.Set("Content-Type", "application/dns-message")
	if code, m, _, body := dohDo(t, http.DefaultClient, req); code != 200 || len(m.Answer) != 1 {
		t.Fatalf("DoH on the admin address: %d %q", code, body)
	}
}
