package zone

import (
	"peerdns/messages"

	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"peerdns/internal/view"
)

// fastMsg is t's fast answer to (name, qtype), unpacked, with the SOA
// serials zeroed (answer and authority: a reused node keeps the serial
// it was built at, TestRebuildKeepsEachZonesSerial);
// nil when the query takes the slow path.
func fastMsg(t *testing.T, tb *Table, name string, qtype uint16) *dns.Msg {
	t.Helper()
	out := make([]byte, 1232)
	n := tb.Fast(query(name, qtype, false), out, 1232, 1232)
	if n == 0 {
		return nil
	}
	m := new(dns.Msg)
	if err := m.Unpack(out[:n]); err != nil {
		t.Fatal(err)
	}
	zeroSerials(append(m.Answer, m.Ns...))
	return m
}

// zeroSerials sets the serial of every SOA in rrs to 0.
func zeroSerials(rrs []dns.RR) {
	for _, rr := range rrs {
		if soa, ok := rr.(*dns.SOA); ok {
			soa.Serial = 0
		}
	}
}

// A rebuild takes the unchanged domains' nodes from the table in use,
// packs the changed and new ones, drops the removed ones, and answers
// every query as a full build of the same snapshots does.
func TestRebuildReusesUnchangedDomains(t *testing.T) {
	local := func(v uint64, js ...string) *messages.LocalSnapshot {
		s := &messages.LocalSnapshot{Version: v}
		for _, j := range js {
			r, err := messages.ParseLocalRecord([]byte(j))
			if err != nil {
				t.Fatal(err)
			}
			s.Records = append(s.Records, r)
		}
		return s
	}
	l1 := local(1, `{"name":"go.lan","type":"CNAME","data":"b.p2p"}`, `{"name":"www.a.p2p","type":"A","data":"192.0.2.8"}`)
	dom := func(name, ip string) *view.Domain {
		return &view.Domain{Name: name, Status: "resolved", IP: netip.MustParseAddr(ip)}
	}
	v1 := &view.Snapshot{Version: 1, Domains: map[string]*view.Domain{
		"a.p2p": dom("a.p2p", "10.77.0.1"), "b.p2p": dom("b.p2p", "10.77.0.2"), "c.p2p": dom("c.p2p", "10.77.0.3"),
	}, Internal: map[string]netip.Addr{"admin.p2p": netip.MustParseAddr("127.0.0.1")}}
	o := Options{TTL: 30}
	t1 := Build(v1, l1, o)

	// The ledger's way: copy the map, replace what changed.
	v2 := &view.Snapshot{Version: 2, Domains: maps.Clone(v1.Domains), Internal: v1.Internal}
	v2.Domains["b.p2p"] = dom("b.p2p", "10.77.0.22")
	delete(v2.Domains, "c.p2p")
	v2.Domains["d.p2p"] = dom("d.p2p", "10.77.0.4")
	t2 := Rebuild(t1, v2, l1, o)
	full := Build(v2, l1, o)

	key := func(name string) string { k, _ := Key(name); return k }
	if t2.parents[key("a.p2p")] != t1.parents[key("a.p2p")] {
		t.Error("unchanged a.p2p was packed again")
	}
	if t2.parents[key("b.p2p")] == t1.parents[key("b.p2p")] {
		t.Error("changed b.p2p was reused")
	}
	for _, name := range []string{"a.p2p.", "b.p2p.", "c.p2p.", "d.p2p.", "x.a.p2p.", "www.a.p2p.", "go.lan.", "admin.p2p.", "gone.p2p."} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeMX, dns.TypeCNAME} {
			got, want := fastMsg(t, t2, name, qt), fastMsg(t, full, name, qt)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s %s: rebuilt\n%v\nfull build\n%v", name, dns.TypeToString[qt], got, want)
			}
		}
	}
	if m := fastMsg(t, t2, "go.lan.", dns.TypeA); m == nil || len(m.Answer) != 2 || m.Answer[1].(*dns.A).A.String() != "10.77.0.22" {
		t.Errorf("go.lan A through the CNAME = %v, want b.p2p's new address", m)
	}
	if m := fastMsg(t, t2, "c.p2p.", dns.TypeA); m == nil || m.Rcode != dns.RcodeNameError {
		t.Errorf("removed c.p2p = %v, want NXDOMAIN", m)
	}

	// Other local records (version preferences with them): nothing is reused.
	l2 := local(2, `{"name":"go.lan","type":"CNAME","data":"a.p2p"}`)
	t3 := Rebuild(t2, v2, l2, o)
	if t3.parents[key("a.p2p")] == t2.parents[key("a.p2p")] {
		t.Error("a.p2p reused across a change of the local records")
	}
	if t4 := Rebuild(t3, v2, l2, Options{TTL: 60}); t4.parents[key("a.p2p")] == t3.parents[key("a.p2p")] {
		t.Error("a.p2p reused across a change of TTL")
	}
}

// BenchmarkRebuildP2P compiles 1,000 and 10,000 resolved p2p domains of
// which ten changed since the table in use (a view publish in a burst of
// claims), the views made as the ledger makes them (view.Next).
func BenchmarkRebuildP2P(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			changes := map[string]*view.Domain{}
			for i := range n {
				name := fmt.Sprintf("bulk%d.p2p", i)
				changes[name] = &view.Domain{Name: name, Status: "resolved", IP: netip.AddrFrom4([4]byte{127, 77, byte(i >> 8), byte(i)})}
			}
			v := view.Next(nil, 1, changes)
			prev := Build(v, nil, Options{})
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				clear(changes)
				for j := 0; j < 10; j++ {
					name := fmt.Sprintf("bulk%d.p2p", (i*10+j)%n)
					changes[name] = &view.Domain{Name: name, Status: "resolved", IP: v.Domains[name].IP}
				}
				v = view.Next(v, v.Version+1, changes)
				b.StartTimer()
				prev = Rebuild(prev, v, nil, Options{})
			}
		})
	}
}

// A table patched from the one before answers, name for name, what a
// full build of the same snapshots answers, through random sequences of
// changes: names one to three labels deep (empty non-terminals come and
// go), ns.p2p (over the zone's own name server), an internal domain's
// name claimed, domains unresolved and preferred public, with and without
// local records, views made as the ledger makes them (with the names
// they changed) and copies that name nothing (the table walks them).
func TestRebuildPatchesAsAFullBuildAnswers(t *testing.T) {
	names := []string{"a.p2p", "b.p2p", "c.p2p", "x.a.p2p", "y.x.a.p2p", "q.r.p2p", "ns.p2p", "admin.p2p", "pub.p2p"}
	probe := append(slices.Clone(names), "r.p2p", "x.r.p2p", "z.a.p2p", "gone.p2p", "p2p", "www.c.p2p", "go.lan")
	internal := map[string]netip.Addr{"admin.p2p": netip.MustParseAddr("127.0.0.1")}
	prefs := &messages.LocalSnapshot{Version: 1, Prefs: map[string]string{"pub.p2p": messages.VersionPublic}}
	cname, err := messages.ParseLocalRecord([]byte(`{"name":"go.lan","type":"CNAME","data":"b.p2p"}`))
	if err != nil {
		t.Fatal(err)
	}
	withRecords := &messages.LocalSnapshot{Version: 2, Prefs: prefs.Prefs, Records: []messages.LocalRecord{cname}}
	o := Options{TTL: 30, NSAddrs: []netip.Addr{netip.MustParseAddr("192.0.2.53")}}
	answers := func(tb *Table) string {
		var b strings.Builder
		for _, name := range probe {
			for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSOA, dns.TypeNS, dns.TypeTXT} {
				r := tb.Resolve(name, qt, dns.ClassINET)
				zeroSerials(r.Answer)
				fmt.Fprintf(&b, "%s %d: %d %d %v %v %v %v | %v\n", name, qt, r.Kind, r.Rcode, r.Authoritative, r.Answer, r.Extra, r.Upstream, fastMsg(t, tb, dns.Fqdn(name), qt))
			}
		}
		return b.String()
	}
	r := rand.New(rand.NewPCG(7, 7))
	for _, l := range []*messages.LocalSnapshot{prefs, withRecords} {
		var v *view.Snapshot
		var tb *Table
		for step := range 300 {
			changes := map[string]*view.Domain{}
			for range 1 + r.IntN(3) {
				name := names[r.IntN(len(names))]
				changes[name] = nil
				if r.IntN(4) > 0 {
					d := &view.Domain{Name: name, Status: "resolved", IP: netip.AddrFrom4([4]byte{10, 77, 0, byte(r.IntN(250))})}
					if r.IntN(5) == 0 {
						d.Status = "insufficient_quorum"
					}
					changes[name] = d
				}
			}
			var next *view.Snapshot
			if r.IntN(5) == 0 && v != nil {
				// A copy that names nothing: the table compares the two.
				next = &view.Snapshot{Version: v.Version + 1, Domains: maps.Clone(v.Domains)}
				for name, d := range changes {
					if d == nil {
						delete(next.Domains, name)
					} else {
						next.Domains[name] = d
					}
				}
			} else {
				var ver uint64 = 1
				if v != nil {
					ver = v.Version + 1
				}
				next = view.Next(v, ver, changes)
			}
			next.Internal = internal
			patched := Rebuild(tb, next, l, o)
			full := Build(next, l, o)
			if got, want := answers(patched), answers(full); got != want {
				t.Fatalf("records %d, step %d (%v): patched table answers\n%s\nfull build\n%s", len(l.Records), step, slices.Sorted(maps.Keys(changes)), got, want)
			}
			if !maps.Equal(patched.ents, full.ents) && len(patched.ents)+len(full.ents) > 0 {
				t.Fatalf("step %d: empty non-terminals %v, full build %v", step, patched.ents, full.ents)
			}
			v, tb = next, patched
		}
	}
}

// Every answer from one zone names the zone's serial, whether it was
// packed by this build or kept from the one before: a kept domain keeps
// the serial it was built at, a changed one and p2p. take the new one.
func TestRebuildKeepsEachZonesSerial(t *testing.T) {
	dom := func(name, ip string) *view.Domain {
		return &view.Domain{Name: name, Status: "resolved", IP: netip.MustParseAddr(ip)}
	}
	l := &messages.LocalSnapshot{Version: 4}
	r, err := messages.ParseLocalRecord([]byte(`{"name":"www.a.p2p","type":"TXT","data":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	l.Records = append(l.Records, r)
	v1 := &view.Snapshot{Version: 1, Domains: map[string]*view.Domain{
		"a.p2p": dom("a.p2p", "10.77.0.1"), "b.p2p": dom("b.p2p", "10.77.0.2"),
	}}
	o := Options{TTL: 30}
	t1 := Build(v1, l, o)
	v2 := &view.Snapshot{Version: 2, Domains: maps.Clone(v1.Domains)}
	v2.Domains["b.p2p"] = dom("b.p2p", "10.77.0.22")
	t2 := Rebuild(t1, v2, l, o)

	// serials are the SOA serials of tb's answer to (name, qtype): the
	// packed one when there is one, the slow path's too.
	serials := func(tb *Table, name string, qtype uint16) []uint32 {
		var got []uint32
		collect := func(rrs []dns.RR) {
			for _, rr := range rrs {
				if soa, ok := rr.(*dns.SOA); ok {
					got = append(got, soa.Serial)
				}
			}
		}
		out := make([]byte, 1232)
		if n := tb.Fast(query(name, qtype, false), out, 1232, 1232); n > 0 {
			m := new(dns.Msg)
			if err := m.Unpack(out[:n]); err != nil {
				t.Fatal(err)
			}
			collect(append(m.Answer, m.Ns...))
		}
		res := tb.Resolve(name, qtype, dns.ClassINET)
		collect(append(res.Answer, res.Ns...))
		return got
	}
	for _, c := range []struct {
		zone string
		want uint32
		asks []string // names asked: every type below
	}{
		{"a.p2p.", 1 + 4, []string{"a.p2p.", "x.a.p2p.", "www.a.p2p."}}, // kept from t1
		{"b.p2p.", 2 + 4, []string{"b.p2p.", "x.b.p2p."}},               // built again
		{"p2p.", 2 + 4, []string{"p2p.", "nothing-here.p2p.", "ns.p2p."}},
	} {
		for _, name := range c.asks {
			for _, qtype := range []uint16{dns.TypeSOA, dns.TypeANY, dns.TypeMX} {
				got := serials(t2, name, qtype)
				// SOA (an answer or NODATA) and MX (NODATA) name the
				// zone's SOA everywhere; ANY only at the apex.
				if len(got) == 0 && qtype != dns.TypeANY {
					t.Errorf("%s %s: no SOA in the answer", name, dns.TypeToString[qtype])
				}
				for _, s := range got {
					if s != c.want {
						t.Errorf("%s %s: serial %d, want %d (%s's)", name, dns.TypeToString[qtype], s, c.want, c.zone)
					}
				}
			}
		}
	}
}
