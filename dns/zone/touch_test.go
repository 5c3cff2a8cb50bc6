package zone

import (
	"testing"

	"github.com/miekg/dns"
)

// A p2p domain is reported once per epoch, on the fast path and through
// Resolve, for itself and its subdomains; internal domains and local
// records are not; a full channel drops instead of blocking.
func TestTouches(t *testing.T) {
	ts := NewTouches(1)
	base := testTable(t, 2)
	tb := Build(base.view, base.local, Options{Touches: ts})
	out := make([]byte, 1232)
	drain := func() []string {
		var got []string
		for {
			select {
			case d := <-ts.C():
				got = append(got, d)
			default:
				return got
			}
		}
	}
	tb.Fast(query("site.p2p.", dns.TypeA, false), out, 1232, 1232)
	tb.Fast(query("SITE.p2p.", dns.TypeAAAA, false), out, 1232, 1232)
	tb.Resolve("www.site.p2p", dns.TypeA, dns.ClassINET)
	tb.Fast(query("admin.p2p.", dns.TypeA, false), out, 1232, 1232)
	tb.Fast(query("host1.bench.test.", dns.TypeA, false), out, 1232, 1232)
	if got := drain(); len(got) != 1 || got[0] != "site.p2p" {
		t.Fatalf("first epoch reported %v, want [site.p2p]", got)
	}
	ts.Tick()
	tb.Resolve("www.site.p2p", dns.TypeA, dns.ClassINET)
	// The channel holds one: v6.p2p is dropped, not waited for.
	tb.Fast(query("v6.p2p.", dns.TypeAAAA, false), out, 1232, 1232)
	if got := drain(); len(got) != 1 || got[0] != "site.p2p" {
		t.Fatalf("second epoch reported %v, want [site.p2p]", got)
	}
	ts.Tick()
	tb.Fast(query("v6.p2p.", dns.TypeAAAA, false), out, 1232, 1232)
	if got := drain(); len(got) != 1 || got[0] != "v6.p2p" {
		t.Fatalf("third epoch reported %v, want [v6.p2p]", got)
	}
}

// Reporting costs the fast path no allocation.
func TestTouchesNoAlloc(t *testing.T) {
	ts := NewTouches(1)
	base := testTable(t, 2)
	tb := Build(base.view, base.local, Options{Touches: ts})
	out := make([]byte, 1232)
	q := query("site.p2p.", dns.TypeA, false)
	if n := testing.AllocsPerRun(1000, func() {
		ts.Tick()
		tb.Fast(q, out, 1232, 1232)
		select {
		case <-ts.C():
		default:
		}
	}); n != 0 {
		t.Fatalf("%v allocations per answer", n)
	}
}
