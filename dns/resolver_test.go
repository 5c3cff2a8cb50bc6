package dns

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"peerdns/internal/view"
)

// A real recursive resolver in front of the node: Debian's unbound with
// stub zones for p2p. and for the operator's local suffix home. pointing
// at the node, QNAME minimisation and 0x20 (use-caps-for-id) on, as an
// operator would run it.

// freePort is a loopback port free on UDP and TCP a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	pc, ln := listenPair(t)
	port := pc.LocalAddr().(*net.UDPAddr).Port
	pc.Close()
	ln.Close()
	return port
}

// startUnbound runs unbound in the foreground on a free loopback port
// with stub zones for zones pointing at node, and returns its address.
func startUnbound(t *testing.T, node string, zones ...string) string {
	t.Helper()
	bin, err := exec.LookPath("unbound")
	if err != nil {
		if _, err = os.Stat("/usr/sbin/unbound"); err != nil {
			t.Skip("unbound not installed (apt-get install unbound)")
		}
		bin = "/usr/sbin/unbound"
	}
	host, port, _ := net.SplitHostPort(node)
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		dir := t.TempDir()
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		var conf strings.Builder
		fmt.Fprintf(&conf, `server:
	interface: 127.0.0.1
	port: %s
	directory: "%s"
	pidfile: "%s/unbound.pid"
	logfile: "%s/unbound.log"
	username: ""
	chroot: ""
	do-daemonize: no
	use-syslog: no
	verbosity: 1
	num-threads: 1
	do-ip6: no
	so-reuseport: no
	interface-automatic: no
	module-config: "iterator"
	access-control: 127.0.0.0/8 allow
	do-not-query-localhost: no
	qname-minimisation: yes
	use-caps-for-id: yes
	minimal-responses: no
	root-hints: ""
remote-control:
	control-enable: no
`, strings.Split(addr, ":")[1], dir, dir, dir)
		for _, z := range zones {
			fmt.Fprintf(&conf, "stub-zone:\n\tname: %q\n\tstub-addr: %s@%s\n", z, host, port)
		}
		cf := filepath.Join(dir, "unbound.conf")
		if err := os.WriteFile(cf, []byte(conf.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-d", "-c", cf)
		cmd.Dir = dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		up := false
		deadline := time.Now().Add(10 * time.Second)
		for !up && time.Now().Before(deadline) {
			select {
			case err := <-exited:
				log, _ := os.ReadFile(filepath.Join(dir, "unbound.log"))
				last = fmt.Errorf("unbound exited: %v: %s", err, log)
				deadline = time.Time{}
				continue
			default:
			}
			q := new(dns.Msg)
			q.SetQuestion("version.server.", dns.TypeTXT)
			q.Question[0].Qclass = dns.ClassCHAOS
			c := &dns.Client{Timeout: 200 * time.Millisecond}
			if _, _, err := c.Exchange(q, addr); err == nil {
				up = true
			} else {
				time.Sleep(20 * time.Millisecond) // unbound has no readiness signal; poll with a deadline
			}
		}
		if up {
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
				if t.Failed() {
					log, _ := os.ReadFile(filepath.Join(dir, "unbound.log"))
					t.Logf("unbound log:\n%s", log)
				}
			})
			return addr
		}
		if deadline.IsZero() {
			continue // exited (port taken?): try another port
		}
		cmd.Process.Kill()
		<-exited
		last = errors.New("unbound did not answer within 10s")
	}
	t.Fatalf("unbound: %v", last)
	return ""
}

func resolverSources(t testing.TB) (*view.Published, *view.LocalPublished) {
	return publishSources(t, knotSerial-1, map[string]string{"site.p2p": "10.77.0.5", "a.deep.p2p": "10.77.0.6"},
		`{"name":"nas.home","type":"A","ttl":120,"data":"192.0.2.20"}`,
		`{"name":"txt.site.p2p","type":"TXT","ttl":120,"data":"under site.p2p"}`)
}

func TestResolverInFront(t *testing.T) {
	pub, local := resolverSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	res := startUnbound(t, s.Addr(), "p2p.", "home.")

	askRes := func(name string, qtype uint16) *dns.Msg {
		t.Helper()
		q := new(dns.Msg)
		q.SetQuestion(name, qtype)
		q.SetEdns0(1232, false)
		c := &dns.Client{Timeout: 5 * time.Second}
		m, _, err := c.Exchange(q, res)
		if err != nil {
			t.Fatalf("unbound %s %s: %v", name, dns.TypeToString[qtype], err)
		}
		return m
	}
	for _, tt := range []struct {
		name   string
		qtype  uint16
		rcode  int
		answer string // the last answer record's rdata, "" none
		soa    string // owner of the SOA in authority, "" none wanted
	}{
		{"p2p.", dns.TypeSOA, 0, "ns.p2p. hostmaster.p2p. 5 3600 600 86400 30", ""},
		{"p2p.", dns.TypeNS, 0, "ns.p2p.", ""},
		{"site.p2p.", dns.TypeA, 0, "10.77.0.5", ""},
		{"WWW.Site.p2p.", dns.TypeA, 0, "10.77.0.5", ""},
		{"x.y.a.deep.p2p.", dns.TypeA, 0, "10.77.0.6", ""}, // QNAME minimisation walks deep.p2p (NODATA, not NXDOMAIN)
		{"site.p2p.", dns.TypeSOA, 0, "ns.p2p. hostmaster.site.p2p. 5 3600 600 86400 30", ""},
		{"site.p2p.", dns.TypeMX, 0, "", "site.p2p."},
		{"txt.site.p2p.", dns.TypeTXT, 0, `"under site.p2p"`, ""},
		{"admin.p2p.", dns.TypeA, 0, "127.0.0.1", ""},
		{"nobody.p2p.", dns.TypeA, dns.RcodeNameError, "", "p2p."},
		{"nas.home.", dns.TypeA, 0, "192.0.2.20", ""},
		{"nas.home.", dns.TypeMX, 0, "", ""}, // not our zone: NODATA without SOA, not AA
	} {
		t.Run(tt.name+dns.TypeToString[tt.qtype], func(t *testing.T) {
			m := askRes(tt.name, tt.qtype)
			if m.Rcode != tt.rcode {
				t.Fatalf("rcode %s, want %s:\n%v", dns.RcodeToString[m.Rcode], dns.RcodeToString[tt.rcode], m)
			}
			got := ""
			if len(m.Answer) > 0 {
				rr := m.Answer[len(m.Answer)-1]
				got = strings.TrimPrefix(rr.String(), rr.Header().String())
			}
			if got != tt.answer {
				t.Fatalf("answer %q, want %q:\n%v", got, tt.answer, m)
			}
			if tt.soa != "" && (len(m.Ns) == 0 || m.Ns[0].Header().Name != tt.soa || m.Ns[0].Header().Rrtype != dns.TypeSOA) {
				t.Fatalf("authority %v, want the SOA of %s", m.Ns, tt.soa)
			}
		})
	}

	// The negative answer is cached: asked again, unbound answers from its
	// cache, with the SOA, and the node sees no new query.
	before := s.Stats().Queries
	m := askRes("nobody.p2p.", dns.TypeA)
	if m.Rcode != dns.RcodeNameError || len(m.Ns) == 0 {
		t.Fatalf("second NXDOMAIN: %v", m)
	}
	if soa, ok := m.Ns[0].(*dns.SOA); !ok || soa.Hdr.Ttl > 30 {
		t.Fatalf("cached negative answer's SOA %v: want TTL ≤ 30 (min(TTL, MINIMUM))", m.Ns[0])
	}
	m = askRes("site.p2p.", dns.TypeMX)
	if m.Rcode != 0 || len(m.Answer) != 0 || len(m.Ns) == 0 {
		t.Fatalf("second NODATA: %v", m)
	}
	if after := s.Stats().Queries; after != before {
		t.Fatalf("the node saw %d more queries: the negative answers were not cached", after-before)
	}
}
