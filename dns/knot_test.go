package dns

import (
	"peerdns/messages"

	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"peerdns/internal/view"
)

// A differential test: the node and Knot DNS (the reference
// authoritative server, Debian's knot) serve the same names, get the same
// generated questions, and must give the same RCODE, AA and TC flags and
// the same answer, authority and additional sections (OPT aside). RA is
// not compared: the node is also a resolver for this client.
//
// The zone files say in DNS terms what the node's data means: each
// internal and p2p domain is a zone of its own (SOA, NS, its address at
// the apex and, as a wildcard, below it), delegated from p2p.; a local
// record inside one is a record of that zone. (One thing a zone file
// cannot say is left out of the questions: in the node a p2p domain also
// answers the names below one of its local records, where Knot's
// wildcard stops at the existing name, RFC 4592 §3.3.1.)

// knotSerial is the zones' serial: the node's is the sum of its view's
// and local records' versions (publishSources: the view at knotSerial-1,
// the records at 1).
const knotSerial = 5

func knotZones(glue string) map[string]string {
	soa := func(z string) string {
		return fmt.Sprintf("$TTL 30\n%s SOA ns.p2p. hostmaster.%s %d 3600 600 86400 30\n%s NS ns.p2p.\n", z, z, knotSerial, z)
	}
	addr := func(z, typ, ip string) string {
		return soa(z) + fmt.Sprintf("%s %s %s\n*.%s %s %s\n", z, typ, ip, z, typ, ip)
	}
	return map[string]string{
		"p2p.": soa("p2p.") + "ns.p2p. A " + glue + "\n" +
			"site.p2p. NS ns.p2p.\nv6.p2p. NS ns.p2p.\na.deep.p2p. NS ns.p2p.\nadmin.p2p. NS ns.p2p.\n" +
			"x.y.p2p. 120 TXT \"local under p2p\"\n",
		"site.p2p.":   addr("site.p2p.", "A", "10.77.0.5") + "txt.site.p2p. 120 TXT \"local under site\"\ntxt.site.p2p. A 10.77.0.5\n",
		"v6.p2p.":     addr("v6.p2p.", "AAAA", "fd00::5"),
		"a.deep.p2p.": addr("a.deep.p2p.", "A", "10.77.0.6"),
		"admin.p2p.":  addr("admin.p2p.", "A", "127.0.0.1"),
	}
}

func knotSources(t testing.TB) (*view.Published, *view.LocalPublished) {
	return publishSources(t, knotSerial-1, map[string]string{"site.p2p": "10.77.0.5", "v6.p2p": "fd00::5", "a.deep.p2p": "10.77.0.6"},
		`{"name":"txt.site.p2p","type":"TXT","ttl":120,"data":"local under site"}`,
		`{"name":"x.y.p2p","type":"TXT","ttl":120,"data":"local under p2p"}`)
}

// publishSources publishes resolved p2p domains (name → IP), the admin
// domain as internal, and local records (JSON as the admin API takes
// them), as the ledger and the localdns actor would: the view at
// version, the records at 1.
func publishSources(t testing.TB, version uint64, domains map[string]string, recordJSON ...string) (*view.Published, *view.LocalPublished) {
	t.Helper()
	ds := map[string]*view.Domain{}
	for name, ip := range domains {
		ds[name] = &view.Domain{Name: name, Status: "resolved", IP: netip.MustParseAddr(ip)}
	}
	pub := &view.Published{}
	pub.Store(&view.Snapshot{Version: version, Domains: ds, Internal: map[string]netip.Addr{"admin.p2p": netip.MustParseAddr("127.0.0.1")}})
	local := &view.LocalPublished{}
	var recs []messages.LocalRecord
	for _, js := range recordJSON {
		recs = append(recs, mustRecord(t, js))
	}
	local.Store(&messages.LocalSnapshot{Version: 1, Records: recs})
	return pub, local
}

// startKnot runs knotd in the foreground on a free loopback port serving
// zones (name → zone file text) and returns its address.
func startKnot(t *testing.T, zones map[string]string) string {
	return startKnotConf(t, zones, "", "")
}

// startKnotConf is startKnot with extra top-level configuration (conf)
// and extra lines for the default template (tmpl, indented by four).
func startKnotConf(t *testing.T, zones map[string]string, extra, tmpl string) string {
	t.Helper()
	bin, err := exec.LookPath("knotd")
	if err != nil {
		if _, err = os.Stat("/usr/sbin/knotd"); err != nil {
			t.Skip("knotd not installed (apt-get install knot)")
		}
		bin = "/usr/sbin/knotd"
	}
	var last string
	for attempt := 0; attempt < 5; attempt++ {
		dir := t.TempDir()
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		var conf strings.Builder
		fmt.Fprintf(&conf, "server:\n  rundir: %q\n  listen: %s\n  udp-workers: 1\n  tcp-workers: 1\n  background-workers: 1\n",
			dir, strings.Replace(addr, ":", "@", 1))
		fmt.Fprintf(&conf, "database:\n  storage: %q\ncontrol:\n  listen: %q\nlog:\n  - target: stderr\n    any: info\n", dir, filepath.Join(dir, "knot.sock"))
		conf.WriteString(extra)
		fmt.Fprintf(&conf, "template:\n  - id: default\n    storage: %q\n    zonefile-load: whole\n    journal-content: none\n%szone:\n", dir, tmpl)
		for z, text := range zones {
			file := filepath.Join(dir, strings.TrimSuffix(z, ".")+".zone")
			if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&conf, "  - domain: %s\n    file: %q\n", z, file)
		}
		cf := filepath.Join(dir, "knot.conf")
		if err := os.WriteFile(cf, []byte(conf.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		var logs strings.Builder
		cmd := exec.Command(bin, "-c", cf)
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		// Ready when every zone answers its SOA (polled with a deadline:
		// knotd loads zones after it starts listening).
		deadline := time.Now().Add(10 * time.Second)
		ready, dead := false, false
		for !ready && !dead && time.Now().Before(deadline) {
			select {
			case <-exited:
				dead = true
				continue
			default:
			}
			ready = true
			for z := range zones {
				q := new(dns.Msg).SetQuestion(z, dns.TypeSOA)
				c := &dns.Client{Timeout: 200 * time.Millisecond}
				if m, _, err := c.Exchange(q, addr); err != nil || m.Rcode != 0 || !m.Authoritative {
					ready = false
					break
				}
			}
			if !ready {
				time.Sleep(20 * time.Millisecond) // knotd has no readiness signal here; poll with a deadline
			}
		}
		if ready {
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
				if t.Failed() {
					t.Logf("knotd log:\n%s", logs.String())
				}
			})
			return addr
		}
		if !dead {
			cmd.Process.Kill()
			<-exited
		}
		last = logs.String()
	}
	t.Fatalf("knotd did not start:\n%s", last)
	return ""
}

// canon is the parts of m the two servers must agree on.
func canon(m *dns.Msg) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rcode=%s aa=%v tc=%v\n", dns.RcodeToString[m.Rcode], m.Authoritative, m.Truncated)
	for i, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		var lines []string
		for _, rr := range sec {
			if rr.Header().Rrtype == dns.TypeOPT {
				continue
			}
			lines = append(lines, strings.ToLower(rr.String()))
		}
		sort.Strings(lines)
		fmt.Fprintf(&b, "%s:\n", []string{"answer", "authority", "additional"}[i])
		for _, l := range lines {
			b.WriteString("  " + l + "\n")
		}
	}
	return b.String()
}

// askBoth sends q over c to the node and to Knot and returns both
// answers in canon form.
func askBoth(t *testing.T, c *dns.Client, q *dns.Msg, node, knot string) (mine, theirs string) {
	t.Helper()
	for i, addr := range []string{node, knot} {
		m, _, err := c.Exchange(q.Copy(), addr)
		if err != nil {
			t.Fatalf("%s %s %s: %v", []string{"node", "knot"}[i], q.Question[0].Name, dns.TypeToString[q.Question[0].Qtype], err)
		}
		if i == 0 {
			mine = canon(m)
		} else {
			theirs = canon(m)
		}
	}
	return mine, theirs
}

func TestKnotDifferential(t *testing.T) {
	pub, local := knotSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	host, _, _ := net.SplitHostPort(s.Addr())
	knot := startKnot(t, knotZones(host))

	names := []string{"p2p.", "ns.p2p.", "x.ns.p2p.", "site.p2p.", "Www.Site.P2p.", "a.b.site.p2p.", "txt.site.p2p.",
		"v6.p2p.", "x.v6.p2p.", "a.deep.p2p.", "deep.p2p.", "q.a.deep.p2p.", "admin.p2p.", "x.Admin.p2p.",
		"x.y.p2p.", "y.p2p.", "nobody.p2p.", "a.nobody.p2p."}
	rnd := rand.New(rand.NewPCG(7, 34))
	label := func() string {
		const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"
		n := 1 + rnd.IntN(12)
		b := make([]byte, n)
		for i := range b {
			b[i] = letters[rnd.IntN(len(letters)-1)] // no hyphen: keep labels host names
		}
		return string(b)
	}
	for i := 0; i < 40; i++ {
		parent := []string{"p2p.", "site.p2p.", "v6.p2p.", "a.deep.p2p.", "admin.p2p.", "deep.p2p.", "y.p2p."}[rnd.IntN(7)]
		names = append(names, label()+"."+parent)
	}
	types := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeNS, dns.TypeSOA, dns.TypeMX, dns.TypeTXT, dns.TypeCNAME,
		dns.TypeSRV, dns.TypeCAA, dns.TypePTR, 65280}
	c := &dns.Client{Timeout: 3 * time.Second}
	asked, diff := 0, 0
	for _, name := range names {
		for _, qt := range types {
			for _, edns := range []bool{false, true} {
				q := new(dns.Msg).SetQuestion(name, qt)
				q.RecursionDesired = false
				if edns {
					q.SetEdns0(1232, false)
				}
				asked++
				if a, b := askBoth(t, c, q, s.Addr(), knot); a != b {
					diff++
					if diff <= 10 {
						t.Errorf("%s %s (edns %v):\nnode:\n%sknot:\n%s", name, dns.TypeToString[qt], edns, a, b)
					}
				}
			}
		}
	}
	if diff > 0 {
		t.Fatalf("%d of %d answers differ", diff, asked)
	}
	t.Logf("%d questions, node and Knot agree", asked)
}

// Interoperable server cookies (RFC 9018 §2): with the same secret, a
// cookie the node made verifies at Knot (its mod-cookies, which answers
// BADCOOKIE to any cookie it cannot verify) and Knot's verifies at the
// node (outside the recursion ACL over UDP, where a cookie that does not
// verify gets BADCOOKIE).
func TestCookiesInteropKnot(t *testing.T) {
	const secret = "e5e973e5a6b2a43f48e7dc849e37bfcf"
	pub, local := knotSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}, RecursionAllow: []netip.Prefix{},
		RateLimit: -1, CookieSecret: mustHexT(t, secret)}}, pub, local)
	host, _, _ := net.SplitHostPort(s.Addr())
	knot := startKnotConf(t, knotZones(host), "mod-cookies:\n  - id: shared\n    secret: 0x"+secret+"\n    badcookie-slip: 1\n",
		"    global-module: mod-cookies/shared\n")

	// Controls: a server cookie neither made gets BADCOOKIE from both.
	forged := clientCookie + "01000000" + "00000000" + "0102030405060708"
	for _, srv := range []string{s.Addr(), knot} {
		if m, _ := askCookie(t, "udp", srv, "site.p2p.", dns.TypeA, forged); m.Rcode != dns.RcodeBadCookie {
			t.Fatalf("%s: forged cookie answered %s, want BADCOOKIE", srv, dns.RcodeToString[m.Rcode])
		}
	}
	_, ours := askCookie(t, "udp", s.Addr(), "site.p2p.", dns.TypeA, clientCookie)
	m, theirs := askCookie(t, "udp", knot, "site.p2p.", dns.TypeA, ours)
	if m.Rcode != 0 || len(m.Answer) != 1 {
		t.Fatalf("Knot refused the node's cookie %s: %v", ours, m)
	}
	if len(theirs) != 48 {
		t.Fatalf("Knot's reply cookie %q", theirs)
	}
	if m, _ := askCookie(t, "udp", s.Addr(), "site.p2p.", dns.TypeA, theirs); m.Rcode != 0 || len(m.Answer) != 1 {
		t.Fatalf("the node refused Knot's cookie %s: %v", theirs, m)
	}
}

// Queries whose header counts and bytes disagree — bytes after the last
// record, fewer records than ARCOUNT says — get FORMERR from the node as
// from Knot (and BIND), over UDP and TCP; miekg/dns reads such a message
// as if the extra bytes were not there, and the node answered it.
func TestMalformedLikeKnot(t *testing.T) {
	pub, local := knotSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	host, _, _ := net.SplitHostPort(s.Addr())
	knot := startKnot(t, knotZones(host))

	q := question("site.p2p.", dns.TypeA, dns.ClassINET)
	opt := []byte{0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0} // EDNS0, 1232 bytes
	pkt := func(ar uint16, tail ...[]byte) []byte {
		b := append(header(0x4242, 0, 1, 0, 0, ar), q...)
		for _, p := range tail {
			b = append(b, p...)
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		pkt   []byte
		rcode int
	}{
		{"plain", pkt(0), dns.RcodeSuccess},
		{"with OPT", pkt(1, opt), dns.RcodeSuccess},
		{"three bytes after the question", pkt(0, []byte{1, 2, 3}), dns.RcodeFormatError},
		{"a zero byte after the question", pkt(0, []byte{0}), dns.RcodeFormatError},
		{"two bytes after the OPT", pkt(1, opt, []byte{9, 9}), dns.RcodeFormatError},
		{"ARCOUNT 1, no record", pkt(1), dns.RcodeFormatError},
		{"ARCOUNT 2, one OPT", pkt(2, opt), dns.RcodeFormatError},
		{"two OPT", pkt(2, opt, opt), dns.RcodeFormatError},
		{"OPT option past its RDATA", pkt(1, []byte{0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 6, 0xfd, 0xe9, 0, 9, 1, 2}), dns.RcodeFormatError},
	} {
		for _, proto := range []string{"udp", "tcp"} {
			t.Run(tc.name+"/"+proto, func(t *testing.T) {
				for _, srv := range []struct{ name, addr string }{{"node", s.Addr()}, {"knot", knot}} {
					resp := exchangeRaw(t, proto, srv.addr, tc.pkt)
					var m dns.Msg
					if err := m.Unpack(resp); err != nil {
						t.Fatalf("%s: reply does not unpack: %v (%x)", srv.name, err, resp)
					}
					if m.Id != 0x4242 || m.Rcode != tc.rcode {
						t.Errorf("%s: id %#x rcode %s, want %s", srv.name, m.Id, dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
					}
					if tc.rcode == dns.RcodeFormatError && len(m.Answer) != 0 {
						t.Errorf("%s: FORMERR with answers: %v", srv.name, &m)
					}
				}
			})
		}
	}
}

// exchangeRaw sends pkt over UDP or TCP (framed) and returns the reply;
// it fails t when none comes.
func exchangeRaw(t *testing.T, proto, addr string, pkt []byte) []byte {
	t.Helper()
	if proto == "udp" {
		resp := rawQuery(t, addr, pkt, 3*time.Second)
		if resp == nil {
			t.Fatalf("%s: no reply over UDP", addr)
		}
		return resp
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second)) // a hang guard, not a wait
	if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(pkt))), pkt...)); err != nil {
		t.Fatal(err)
	}
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		t.Fatalf("%s: no reply over TCP: %v", addr, err)
	}
	resp := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(c, resp); err != nil {
		t.Fatalf("%s: reply cut: %v", addr, err)
	}
	return resp
}

// ANY over UDP answers one RRset of the name (RFC 8482 §4.1), the one
// Knot answers: that of the lowest type (A at site.p2p., NS at v6.p2p.
// and p2p.); every RRset of an apex (address, NS, SOA) made a reply 2.6
// times Knot's to any UDP source. Over TCP the node answers them all.
func TestAnyLikeKnot(t *testing.T) {
	pub, local := knotSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	host, _, _ := net.SplitHostPort(s.Addr())
	knot := startKnot(t, knotZones(host))
	for _, name := range []string{"p2p.", "ns.p2p.", "site.p2p.", "Site.P2p.", "x.site.p2p.", "v6.p2p.", "admin.p2p.", "a.deep.p2p.", "x.y.p2p.", "nobody.p2p.", "deep.p2p."} {
		for _, edns := range []bool{false, true} {
			q := new(dns.Msg).SetQuestion(name, dns.TypeANY)
			if edns {
				q.SetEdns0(1232, false)
			}
			b, err := q.Pack()
			if err != nil {
				t.Fatal(err)
			}
			var replies [2]dns.Msg
			for i, addr := range []string{s.Addr(), knot} {
				if err := replies[i].Unpack(exchangeRaw(t, "udp", addr, b)); err != nil {
					t.Fatal(err)
				}
			}
			if a, b := canon(&replies[0]), canon(&replies[1]); a != b {
				t.Errorf("%s ANY over UDP (edns %v):\nnode:\n%sknot:\n%s", name, edns, a, b)
			}
		}
	}
	m := ask(t, "tcp", s.Addr(), "site.p2p.", dns.TypeANY, true)
	types := map[uint16]bool{}
	for _, rr := range m.Answer {
		types[rr.Header().Rrtype] = true
	}
	if len(types) != 3 || !types[dns.TypeA] || !types[dns.TypeNS] || !types[dns.TypeSOA] {
		t.Errorf("site.p2p. ANY over TCP: %v, want A, NS and SOA", m.Answer)
	}
}
