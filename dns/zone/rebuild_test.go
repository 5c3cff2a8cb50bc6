package zone

import (
	"peerdns/messages"

	"fmt"
	"maps"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"peerdns/internal/view"
)

// fastMsg is t's fast answer to (name, qtype), unpacked, with the SOA
// serials zeroed (a reused node keeps the serial it was packed with);
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
	for _, rr := range m.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			soa.Serial = 0
		}
	}
	return m
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

// BenchmarkRebuildP2P compiles 1,000 resolved p2p domains of which ten
// changed since the table in use (a view publish in a burst of claims).
func BenchmarkRebuildP2P(b *testing.B) {
	v := &view.Snapshot{Version: 9, Domains: map[string]*view.Domain{}}
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("bulk%d.p2p", i)
		v.Domains[name] = &view.Domain{Name: name, Status: "resolved", IP: netip.AddrFrom4([4]byte{127, 77, byte(i >> 8), byte(i)})}
	}
	prev := Build(v, nil, Options{})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		next := &view.Snapshot{Version: v.Version + 1, Domains: maps.Clone(v.Domains)}
		for j := 0; j < 10; j++ {
			name := fmt.Sprintf("bulk%d.p2p", (i*10+j)%1000)
			next.Domains[name] = &view.Domain{Name: name, Status: "resolved", IP: v.Domains[name].IP}
		}
		prev = Rebuild(prev, next, nil, Options{})
		v = next
	}
}
