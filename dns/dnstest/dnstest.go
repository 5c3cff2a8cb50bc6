// Package dnstest runs a small real DNS server on loopback that plays the
// public internet in tests of packages that use the node's DNS server.
package dnstest

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"peerdns/internal/testutil"
)

// Upstream answers A queries for the names in its table (UDP and TCP on
// one loopback port) and NXDOMAIN with a SOA for everything else.
type Upstream struct {
	Addr string
	hits atomic.Int64
	mu   sync.Mutex
	a    map[string]string // lowercased FQDN → IPv4
}

// Hits is how many queries it has answered.
func (u *Upstream) Hits() int64 { return u.hits.Load() }

// SetA makes name resolve to ip ("" removes it).
func (u *Upstream) SetA(name, ip string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := strings.ToLower(dns.Fqdn(name))
	if ip == "" {
		delete(u.a, n)
		return
	}
	u.a[n] = ip
}

// ServeDNS implements dns.Handler.
func (u *Upstream) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	u.hits.Add(1)
	m := new(dns.Msg).SetReply(req)
	m.RecursionAvailable = true
	q := req.Question[0]
	u.mu.Lock()
	ip, ok := u.a[strings.ToLower(q.Name)]
	u.mu.Unlock()
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
		Ns: "a.root-servers.net.", Mbox: "nstld.verisign-grs.com.", Serial: 1, Refresh: 1800, Retry: 900, Expire: 604800, Minttl: 60}
	switch {
	case !ok:
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{soa}
	case q.Qtype == dns.TypeA:
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)}}
	default:
		m.Ns = []dns.RR{soa}
	}
	w.WriteMsg(m)
}

// Start runs an Upstream with the given name → IPv4 table until the test
// ends.
func Start(t testing.TB, a map[string]string) *Upstream {
	t.Helper()
	u := &Upstream{a: map[string]string{}}
	for n, ip := range a {
		u.SetA(n, ip)
	}
	pc, ln := ListenPair(t)
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: u}, {Listener: ln, Handler: u}} {
		up := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(up) }
		go srv.ActivateAndServe()
		<-up
		t.Cleanup(func() { srv.Shutdown() })
	}
	u.Addr = pc.LocalAddr().String()
	return u
}

// ListenPair binds UDP and TCP on one free loopback port.
var ListenPair = testutil.ListenPair
