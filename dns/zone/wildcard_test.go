package zone

import (
	"peerdns/messages"

	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"peerdns/internal/view"
)

func wildTable(t testing.TB) *Table {
	t.Helper()
	var recs []messages.LocalRecord
	for _, js := range []string{
		`{"name":"*.dev.lan","type":"A","ttl":60,"data":"10.0.0.1"}`,
		`{"name":"*.dev.lan","type":"TXT","ttl":60,"data":"wild"}`,
		`{"name":"exact.dev.lan","type":"A","ttl":60,"data":"10.0.0.2"}`,
		`{"name":"txtonly.dev.lan","type":"TXT","ttl":60,"data":"mine"}`,
		`{"name":"*.deep.dev.lan","type":"A","ttl":60,"data":"10.0.0.3"}`,
		`{"name":"*.alias.lan","type":"CNAME","ttl":60,"data":"exact.dev.lan"}`,
		`{"name":"*.site.p2p","type":"A","ttl":60,"data":"10.0.0.9"}`,
	} {
		r, err := messages.ParseLocalRecord([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	v := &view.Snapshot{Version: 1, Domains: map[string]*view.Domain{
		"site.p2p": {Name: "site.p2p", Status: "resolved", IP: netip.MustParseAddr("10.77.0.5")},
	}}
	return Build(v, &messages.LocalSnapshot{Version: 1, Records: recs}, Options{})
}

// Wildcards answer names below them that do not exist, with the name
// asked as the owner; exact names (and names below an existing name)
// are not covered; the more specific wildcard wins; the fast and the
// slow path agree.
func TestWildcards(t *testing.T) {
	tb := wildTable(t)
	out := make([]byte, 1232)
	for _, tt := range []struct {
		name   string
		qtype  uint16
		want   string // "" means no answer records from our data
		rcode  int
		upstrm bool
	}{
		{"a.dev.lan.", dns.TypeA, "10.0.0.1", 0, false},
		{"A.b.Dev.LAN.", dns.TypeA, "10.0.0.1", 0, false},
		{"a.dev.lan.", dns.TypeTXT, "wild", 0, false},
		{"a.dev.lan.", dns.TypeMX, "", 0, false}, // NODATA: the wildcard owns the name
		{"exact.dev.lan.", dns.TypeA, "10.0.0.2", 0, false},
		{"txtonly.dev.lan.", dns.TypeA, "", 0, false},        // exact name: NODATA, not the wildcard
		{"x.txtonly.dev.lan.", dns.TypeA, "", 0, true},       // below an existing name: not covered
		{"x.deep.dev.lan.", dns.TypeA, "10.0.0.3", 0, false}, // more specific wildcard
		{"deep.dev.lan.", dns.TypeA, "", 0, true},            // exists (the parent of *.deep.dev.lan): not covered
		{"dev.lan.", dns.TypeA, "", 0, true},                 // the parent is not covered
		{"w.alias.lan.", dns.TypeA, "10.0.0.2", 0, false},    // wildcard CNAME, chased
		{"www.site.p2p.", dns.TypeA, "10.77.0.5", 0, false},  // the p2p domain beats a wildcard under it
	} {
		t.Run(tt.name+dns.TypeToString[tt.qtype], func(t *testing.T) {
			res := tb.Resolve(tt.name, tt.qtype, dns.ClassINET)
			if res.Upstream != tt.upstrm {
				t.Fatalf("Resolve(%q) upstream = %v, want %v", tt.name, res.Upstream, tt.upstrm)
			}
			got := ""
			for _, rr := range res.Answer {
				got += rr.String() + "\n"
			}
			if tt.want == "" && len(res.Answer) != 0 || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Fatalf("Resolve(%q, %s) = %q, want %q", tt.name, dns.TypeToString[tt.qtype], got, tt.want)
			}
			if len(res.Answer) > 0 && res.Answer[0].Header().Name != tt.name {
				t.Fatalf("owner %q, want the name asked %q", res.Answer[0].Header().Name, tt.name)
			}
			// Fast path: the same answer when it answers at all.
			req := query(tt.name, tt.qtype, false)
			if m := tb.Fast(req, out, 1232, 1232); m > 0 {
				var fast dns.Msg
				if err := fast.Unpack(out[:m]); err != nil {
					t.Fatal(err)
				}
				if len(fast.Answer) != len(res.Answer) {
					t.Fatalf("fast %v, slow %v", fast.Answer, res.Answer)
				}
				for i := range fast.Answer {
					if fast.Answer[i].String() != res.Answer[i].String() {
						t.Fatalf("fast %v, slow %v", fast.Answer[i], res.Answer[i])
					}
				}
			} else if !tt.upstrm && tt.want != "" {
				t.Fatalf("Fast(%q) did not answer a wildcard name", tt.name)
			}
		})
	}
}

func TestWildcardFastAllocs(t *testing.T) {
	tb := wildTable(t)
	req := query("any.thing.dev.lan.", dns.TypeA, true)
	out := make([]byte, 1232)
	allocs := testing.AllocsPerRun(1000, func() {
		if tb.Fast(req, out, 1232, 1232) == 0 {
			t.Fatal("not answered")
		}
	})
	if allocs != 0 {
		t.Fatalf("Fast allocates %v times per wildcard query, want 0", allocs)
	}
}

func BenchmarkFastWildcard(b *testing.B) {
	tb := wildTable(b)
	req := query("any.thing.dev.lan.", dns.TypeA, true)
	out := make([]byte, 1232)
	b.ReportAllocs()
	for b.Loop() {
		tb.Fast(req, out, 1232, 1232)
	}
}
