package zone

import (
	"testing"

	"github.com/miekg/dns"
)

// Negative answers carry the SOA of the zone we hold (RFC 2308), the
// same on the fast and the slow path.
func TestNegativeSOA(t *testing.T) {
	tb := testTable(t, 3)
	out := make([]byte, 1232)
	for _, tt := range []struct {
		name    string
		qtype   uint16
		rcode   int
		soa     string // owner of the SOA in authority; "" none
		upsteam bool
	}{
		{"site.p2p.", dns.TypeMX, dns.RcodeSuccess, "site.p2p.", false},
		{"WWW.site.p2p.", dns.TypeTXT, dns.RcodeSuccess, "site.p2p.", false},
		{"admin.p2p.", dns.TypeAAAA, dns.RcodeSuccess, "admin.p2p.", false},
		{"nobody.p2p.", dns.TypeA, dns.RcodeNameError, "p2p.", false},
		{"a.b.nobody.P2P.", dns.TypeAAAA, dns.RcodeNameError, "p2p.", false},
		{"site.p2p.", dns.TypeA, dns.RcodeSuccess, "", false},
		{"host1.bench.test.", dns.TypeMX, dns.RcodeSuccess, "", false}, // local NODATA: no zone of ours
		{"nobody.example.", dns.TypeA, dns.RcodeSuccess, "", true},
		{"p2p.", dns.TypeMX, dns.RcodeSuccess, "p2p.", false},          // the apex of the zone: NODATA
		{"ns.p2p.", dns.TypeMX, dns.RcodeSuccess, "p2p.", false},       // the name server's name
		{"x.ns.p2p.", dns.TypeA, dns.RcodeNameError, "p2p.", false},    // nothing below it
		{"b.p2p.", dns.TypeA, dns.RcodeSuccess, "p2p.", false},         // empty non-terminal of a.b.p2p (RFC 8020)
		{"c.a.b.p2p.", dns.TypeA, dns.RcodeSuccess, "", false},         // under a.b.p2p: its address
		{"x.b.p2p.", dns.TypeA, dns.RcodeNameError, "p2p.", false},     // beside it: nothing
		{"a.b.p2p.", dns.TypeTXT, dns.RcodeSuccess, "a.b.p2p.", false}, // its own zone
	} {
		t.Run(tt.name+dns.TypeToString[tt.qtype], func(t *testing.T) {
			res := tb.Resolve(tt.name, tt.qtype, dns.ClassINET)
			if res.Upstream != tt.upsteam || res.Rcode != tt.rcode {
				t.Fatalf("Resolve = rcode %d upstream %v, want %d %v", res.Rcode, res.Upstream, tt.rcode, tt.upsteam)
			}
			owner := ""
			if len(res.Ns) == 1 {
				soa, ok := res.Ns[0].(*dns.SOA)
				if !ok || soa.Minttl != DefaultTTL || soa.Hdr.Ttl != DefaultTTL {
					t.Fatalf("authority %v", res.Ns[0])
				}
				owner = soa.Hdr.Name
			}
			if owner != tt.soa || len(res.Ns) > 1 {
				t.Fatalf("authority %v, want the SOA of %q", res.Ns, tt.soa)
			}
			if tt.upsteam {
				return
			}
			m := tb.Fast(query(tt.name, tt.qtype, true), out, 1232, 1232)
			if m == 0 {
				t.Fatal("fast path did not answer")
			}
			var fast dns.Msg
			if err := fast.Unpack(out[:m]); err != nil {
				t.Fatal(err)
			}
			if fast.Rcode != tt.rcode || len(fast.Ns) != len(res.Ns) || (len(res.Ns) == 1 && fast.Ns[0].String() != res.Ns[0].String()) || fast.Authoritative != res.Authoritative {
				t.Fatalf("fast %v\nslow %v", &fast, res.Ns)
			}
		})
	}
}

func TestNegativeFastAllocs(t *testing.T) {
	tb := testTable(t, 3)
	nx, nodata := query("nobody.p2p.", dns.TypeA, true), query("www.site.p2p.", dns.TypeMX, false)
	out := make([]byte, 1232)
	if allocs := testing.AllocsPerRun(1000, func() {
		if tb.Fast(nx, out, 1232, 1232) == 0 || tb.Fast(nodata, out, 1232, 1232) == 0 {
			t.Fatal("not answered")
		}
	}); allocs != 0 {
		t.Fatalf("%v allocations per negative answer, want 0", allocs)
	}
}

func TestIsP2P(t *testing.T) {
	for _, tt := range []struct {
		name string
		want bool
	}{
		{"a.p2p.", true},
		{"A.B.P2P.", true},
		{"p2p.", false},
		{"a.p2p.example.", false},
		{`000.\003p2p.`, false}, // a label holding the bytes of "\x03p2p"
		{`a\.p2p.`, false},      // one label "a.p2p"
		{"xp2p.", false},
	} {
		if got := underP2P(tt.name); got != tt.want {
			t.Errorf("underP2P(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
