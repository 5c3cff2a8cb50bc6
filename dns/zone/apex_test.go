package zone

import (
	"peerdns/messages"

	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"peerdns/internal/view"
)

func apexTable(t testing.TB) *Table {
	t.Helper()
	var recs []messages.LocalRecord
	for _, js := range []string{
		`{"name":"nas.home","type":"A","ttl":300,"data":"192.0.2.10"}`,
		`{"name":"txt.site.p2p","type":"TXT","ttl":300,"data":"local under a p2p domain"}`,
		`{"name":"x.y.p2p","type":"TXT","ttl":300,"data":"local under p2p."}`,
	} {
		r, err := messages.ParseLocalRecord([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	v := &view.Snapshot{Version: 9, Domains: map[string]*view.Domain{
		"site.p2p": {Name: "site.p2p", Status: "resolved", IP: netip.MustParseAddr("10.77.0.5")},
	}, Internal: map[string]netip.Addr{"admin.peerdns": netip.MustParseAddr("127.0.0.1")}}
	return Build(v, &messages.LocalSnapshot{Version: 2, Records: recs}, Options{NSAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.53")}})
}

// The apex of every zone the node holds answers SOA and NS, the same on
// both paths; local names outside them are not authoritative.
func TestApex(t *testing.T) {
	tb := apexTable(t)
	out := make([]byte, 1232)
	for _, tt := range []struct {
		name     string
		qtype    uint16
		rcode    int
		aa       bool
		answer   string // first answer record's type and owner, "" none
		ns, glue int
	}{
		{"p2p.", dns.TypeSOA, 0, true, "SOA p2p.", 0, 0},
		{"P2p.", dns.TypeNS, 0, true, "NS P2p.", 0, 1},
		{"ns.p2p.", dns.TypeA, 0, true, "A ns.p2p.", 0, 0},
		{"ns.p2p.", dns.TypeAAAA, 0, true, "", 1, 0},
		{"site.p2p.", dns.TypeSOA, 0, true, "SOA site.p2p.", 0, 0},
		{"SITE.p2p.", dns.TypeNS, 0, true, "NS SITE.p2p.", 0, 0},
		{"www.site.p2p.", dns.TypeSOA, 0, true, "", 1, 0},
		{"www.site.p2p.", dns.TypeNS, 0, true, "", 1, 0},
		{"admin.peerdns.", dns.TypeSOA, 0, true, "SOA admin.peerdns.", 0, 0},
		{"admin.peerdns.", dns.TypeNS, 0, true, "NS admin.peerdns.", 0, 0},
		{"txt.site.p2p.", dns.TypeTXT, 0, true, "TXT txt.site.p2p.", 0, 0},
		{"txt.site.p2p.", dns.TypeMX, 0, true, "", 1, 0},
		{"x.y.p2p.", dns.TypeMX, 0, true, "", 1, 0},
		{"y.p2p.", dns.TypeA, 0, true, "", 1, 0},
		{"nas.home.", dns.TypeA, 0, false, "A nas.home.", 0, 0},
		{"nas.home.", dns.TypeMX, 0, false, "", 0, 0},
	} {
		t.Run(tt.name+dns.TypeToString[tt.qtype], func(t *testing.T) {
			res := tb.Resolve(tt.name, tt.qtype, dns.ClassINET)
			first := ""
			if len(res.Answer) > 0 {
				first = dns.TypeToString[res.Answer[0].Header().Rrtype] + " " + res.Answer[0].Header().Name
			}
			if res.Upstream || res.Rcode != tt.rcode || res.Authoritative != tt.aa || first != tt.answer || len(res.Ns) != tt.ns || len(res.Extra) != tt.glue {
				t.Fatalf("Resolve = %+v", res)
			}
			m := tb.Fast(query(tt.name, tt.qtype, true), out, 1232, 1232)
			if m == 0 {
				t.Fatal("fast path did not answer")
			}
			var fast dns.Msg
			if err := fast.Unpack(out[:m]); err != nil {
				t.Fatal(err)
			}
			if fast.Rcode != tt.rcode || fast.Authoritative != tt.aa || len(fast.Answer) != len(res.Answer) || len(fast.Ns) != tt.ns || len(fast.Extra) != tt.glue+1 {
				t.Fatalf("fast %v\nslow %+v", &fast, res)
			}
			for i := range res.Answer {
				if fast.Answer[i].String() != res.Answer[i].String() {
					t.Fatalf("fast %v, slow %v", fast.Answer[i], res.Answer[i])
				}
			}
			if tt.glue > 0 && fast.Extra[0].String() != "ns.p2p.\t30\tIN\tA\t127.0.0.53" {
				t.Fatalf("glue %v", fast.Extra[0])
			}
		})
	}
}

func TestApexFastAllocs(t *testing.T) {
	tb := apexTable(t)
	soa, ns := query("p2p.", dns.TypeSOA, true), query("site.p2p.", dns.TypeNS, false)
	out := make([]byte, 1232)
	if allocs := testing.AllocsPerRun(1000, func() {
		if tb.Fast(soa, out, 1232, 1232) == 0 || tb.Fast(ns, out, 1232, 1232) == 0 {
			t.Fatal("not answered")
		}
	}); allocs != 0 {
		t.Fatalf("%v allocations per apex answer, want 0", allocs)
	}
}
