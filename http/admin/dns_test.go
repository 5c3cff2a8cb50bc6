package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/router"
	"github.com/miekg/dns"
	"github.com/valyala/fasthttp"

	"peerdns/actors/localdns"
	nodedns "peerdns/dns"
	"peerdns/dns/dnstest"
	"peerdns/http/admin"
	"peerdns/internal/store"
	"peerdns/internal/testutil"
	"peerdns/internal/view"
	"peerdns/messages"
)

type dnsAPI struct {
	url string
	dns *nodedns.Server
}

func startDNSAPI(t *testing.T) *dnsAPI {
	t.Helper()
	up := dnstest.Start(t, map[string]string{"clash.p2p": "198.51.100.9", "public.example": "203.0.113.5"})
	db, err := store.Open(filepath.Join(t.TempDir(), "node.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := &view.Published{}
	v.Store(&view.Snapshot{Version: 1, Domains: map[string]*view.Domain{
		"clash.p2p": {Name: "clash.p2p", Status: "resolved", IP: netip.MustParseAddr("10.77.0.6")},
	}})
	pub := &view.LocalPublished{}
	log := slog.New(slog.DiscardHandler)
	srv, err := nodedns.New(nodedns.Config{Addr: "127.0.0.1:0", UDPSockets: 1, Upstreams: []string{up.Addr}}, v, pub, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	sys := actor.NewActorSystem()
	pid := sys.Root.Spawn(localdns.Props(localdns.Deps{Store: db, Published: pub, View: v, PublicLookup: srv.PublicLookup, Log: log}))
	r := router.New()
	admin.RegisterDNS(r, log, admin.DNSDeps{Root: sys.Root, LocalDNS: pid, Server: srv})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &fasthttp.Server{Handler: r.Handler}
	go hs.Serve(ln)
	t.Cleanup(func() {
		hs.Shutdown()
		sys.Root.StopFuture(pid).Wait()
		sys.Shutdown()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		db.Close()
	})
	return &dnsAPI{url: "http://" + ln.Addr().String(), dns: srv}
}

func (a *dnsAPI) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	return testutil.Call(t, method, a.url+path, body)
}

func (a *dnsAPI) dig(t *testing.T, name string, qtype uint16) []string {
	t.Helper()
	m, _, err := (&dns.Client{Timeout: 3 * time.Second}).Exchange(new(dns.Msg).SetQuestion(dns.Fqdn(name), qtype), a.dns.Addr())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rr := range m.Answer {
		out = append(out, strings.TrimSpace(rr.String()[len(rr.Header().String()):]))
	}
	return out
}

func TestDNSEndpoints(t *testing.T) {
	a := startDNSAPI(t)
	steps := []struct {
		name, method, path, body string
		status                   int
		resp                     string // substring of the body
	}{
		{"empty list", "GET", "/api/local-dns", "", 200, `"records":[]`},
		{"add A", "POST", "/api/add-local-dns", `{"name":"nas.lan","type":"A","ttl":60,"data":"192.168.1.5"}`, 200, "OK"},
		{"add MX", "POST", "/api/add-local-dns", `{"name":"lan","type":"MX","ttl":60,"preference":10,"exchange":"nas.lan"}`, 200, "OK"},
		{"add SRV", "POST", "/api/add-local-dns", `{"name":"_smb._tcp.lan","type":"SRV","ttl":60,"priority":0,"weight":5,"port":445,"target":"nas.lan"}`, 200, "OK"},
		{"add TXT", "POST", "/api/add-local-dns", `{"name":"lan","type":"TXT","data":"hello"}`, 200, "OK"},
		{"add bad IP", "POST", "/api/add-local-dns", `{"name":"x.lan","type":"A","data":"999.1.1.1"}`, 500, "not an IP address"},
		{"add bad type", "POST", "/api/add-local-dns", `{"name":"x.lan","type":"WKS"}`, 500, "not one of"},
		{"add empty body", "POST", "/api/add-local-dns", ``, 500, "empty"},
		{"add not JSON", "POST", "/api/add-local-dns", `{"name":`, 500, "bad JSON"},
		{"update", "POST", "/api/update-local-dns", `{"index":0,"record":{"name":"nas.lan","type":"A","ttl":60,"data":"192.168.1.6"}}`, 200, "OK"},
		{"update bad index", "POST", "/api/update-local-dns", `{"index":9,"record":{"name":"nas.lan","type":"A","data":"192.168.1.6"}}`, 400, "invalid index"},
		{"update negative index", "POST", "/api/update-local-dns", `{"index":-1,"record":{"name":"nas.lan","type":"A","data":"192.168.1.6"}}`, 400, "invalid index"},
		{"update string index", "POST", "/api/update-local-dns", `{"index":"0","record":{"name":"nas.lan","type":"A","data":"192.168.1.6"}}`, 400, "invalid index"},
		{"update no index", "POST", "/api/update-local-dns", `{"record":{"name":"nas.lan","type":"A","data":"192.168.1.6"}}`, 400, "invalid index"},
		{"update bad record", "POST", "/api/update-local-dns", `{"index":0,"record":{"name":"nas.lan","type":"A","data":"::1"}}`, 500, "IPv4"},
		{"update no record", "POST", "/api/update-local-dns", `{"index":0}`, 500, "record is required"},
		{"delete", "POST", "/api/delete-local-dns", `{"index":3}`, 200, "OK"},
		{"delete bad index", "POST", "/api/delete-local-dns", `{"index":3}`, 400, "invalid index"},
		{"delete fractional index", "POST", "/api/delete-local-dns", `{"index":1.5}`, 400, "invalid index"},
		{"version bad", "POST", "/api/update-version-preference", `{"domain":"clash.p2p","version":"ipfs"}`, 400, "invalid version"},
		{"version missing", "POST", "/api/update-version-preference", `{"domain":"clash.p2p"}`, 400, "invalid version"},
		{"version no domain", "POST", "/api/update-version-preference", `{"version":"p2p"}`, 500, "domain is required"},
		{"selector cache empty", "GET", "/api/selector-cache", "", 200, `{}`},
		{"lookup no domain", "POST", "/api/diagnostics/dns-lookup", `{"type":"A"}`, 400, "domain is required"},
		{"lookup bad type", "POST", "/api/diagnostics/dns-lookup", `{"domain":"nas.lan","type":"HINFO"}`, 400, "unsupported lookup type"},
		{"lookup not JSON", "POST", "/api/diagnostics/dns-lookup", `nope`, 400, "invalid JSON"},
		{"clear cache no domain", "POST", "/api/clear-dns-cache", `{}`, 500, "domain is required"},
		{"clear cache", "POST", "/api/clear-dns-cache", `{"domain":"public.example"}`, 200, "OK"},
	}
	for _, s := range steps {
		code, body := a.do(t, s.method, s.path, s.body)
		if code != s.status || !strings.Contains(body, s.resp) {
			t.Fatalf("%s: %s %s = %d %q, want %d containing %q", s.name, s.method, s.path, code, body, s.status, s.resp)
		}
	}
	// The records are live in DNS.
	if got := a.dig(t, "nas.lan", dns.TypeA); !reflect.DeepEqual(got, []string{"192.168.1.6"}) {
		t.Fatalf("nas.lan A = %q", got)
	}
	if got := a.dig(t, "lan", dns.TypeMX); !reflect.DeepEqual(got, []string{"10 nas.lan."}) {
		t.Fatalf("lan MX = %q", got)
	}
	if got := a.dig(t, "lan", dns.TypeTXT); got != nil {
		t.Fatalf("deleted TXT still answered: %q", got)
	}
	// The listing, with indexes and type-specific fields only.
	code, body := a.do(t, "GET", "/api/local-dns", "")
	if code != 200 {
		t.Fatal(code, body)
	}
	var list struct {
		Records []map[string]any `json:"records"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"index": 0.0, "name": "nas.lan", "type": "A", "class": "IN", "ttl": 60.0, "data": "192.168.1.6"},
		{"index": 1.0, "name": "lan", "type": "MX", "class": "IN", "ttl": 60.0, "preference": 10.0, "exchange": "nas.lan"},
		{"index": 2.0, "name": "_smb._tcp.lan", "type": "SRV", "class": "IN", "ttl": 60.0, "priority": 0.0, "weight": 5.0, "port": 445.0, "target": "nas.lan"},
	}
	if !reflect.DeepEqual(list.Records, want) {
		t.Fatalf("records = %v\nwant %v", list.Records, want)
	}

	// clash.p2p also resolves publicly: listed as a conflict, p2p wins
	// until the preference says public.
	testutil.Eventually(t, 5*time.Second, func() error {
		var got struct {
			Conflicts []messages.DNSConflict `json:"conflicts"`
		}
		testutil.MustJSON(t, "GET", a.url+"/api/local-dns", "", 200, &got)
		if want := []messages.DNSConflict{{Domain: "clash.p2p", Version: "p2p", PublicIP: "198.51.100.9"}}; !reflect.DeepEqual(got.Conflicts, want) {
			return fmt.Errorf("conflicts = %+v, want %+v", got.Conflicts, want)
		}
		return nil
	})
	if got := a.dig(t, "clash.p2p", dns.TypeA); !reflect.DeepEqual(got, []string{"10.77.0.6"}) {
		t.Fatalf("clash.p2p (p2p) = %q", got)
	}
	if code, body := a.do(t, "POST", "/api/update-version-preference", `{"domain":"clash.p2p","version":"public"}`); code != 200 {
		t.Fatal(code, body)
	}
	if got := a.dig(t, "clash.p2p", dns.TypeA); !reflect.DeepEqual(got, []string{"198.51.100.9"}) {
		t.Fatalf("clash.p2p (public) = %q", got)
	}
	if _, body := a.do(t, "GET", "/api/selector-cache", ""); body != `{"clash.p2p":"public"}`+"\n" {
		t.Fatalf("selector cache = %s", body)
	}
	if _, body := a.do(t, "GET", "/api/local-dns", ""); !strings.Contains(body, `"version":"public"`) {
		t.Fatalf("conflict version not updated: %s", body)
	}

	// Diagnostics lookup through the node's own resolver.
	for _, tt := range []struct{ body, want string }{
		{`{"domain":"nas.lan"}`, `"success":true,"domain":"nas.lan","type":"A","results":["192.168.1.6"]`},
		{`{"domain":"_smb._tcp.lan","type":"SRV"}`, `"results":["0 5 445 nas.lan."]`},
		{`{"domain":"public.example","type":"A"}`, `"results":["203.0.113.5"]`},
		{`{"domain":"missing.example","type":"A"}`, `"success":false`},
	} {
		code, body := a.do(t, "POST", "/api/diagnostics/dns-lookup", tt.body)
		if code != 200 || !strings.Contains(body, tt.want) || !strings.Contains(body, `"responseTime":`) {
			t.Fatalf("lookup %s = %d %s, want %s", tt.body, code, body, tt.want)
		}
	}
}
