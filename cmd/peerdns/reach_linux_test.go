package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// Reach tests: real node processes in network namespaces, where UDP is
// dropped or both sides sit behind random-port ("symmetric") masquerade.
// Only documentation ranges are used (192.0.2.0/24, 198.51.100.0/24,
// 203.0.113.0/24), no namespace has a route out, and every namespace is
// deleted at the end.

// reachLab makes namespaces named prr-<pid>-<name>.
type reachLab struct {
	t      *testing.T
	prefix string
	made   []string
}

func newReachLab(t *testing.T) *reachLab {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: reach lab with node processes in network namespaces")
	}
	if os.Geteuid() != 0 {
		t.Skip("reach lab needs root for network namespaces (run the tests as root, as CI does)")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("reach lab needs %s (apt-get install iproute2 nftables)", tool)
		}
	}
	l := &reachLab{t: t, prefix: fmt.Sprintf("%s-%d", reachPrefix(), os.Getpid()%100000)}
	probe := l.prefix + "-probe"
	if err := ipCmd("netns", "add", probe); err != nil {
		t.Skipf("reach lab: network namespaces refused here (%v)", err)
	}
	_ = ipCmd("netns", "del", probe)
	t.Cleanup(func() {
		for _, ns := range l.made {
			_ = ipCmd("netns", "del", ns)
		}
	})
	return l
}

func (l *reachLab) ns(name string) string { return l.prefix + "-" + name }

func (l *reachLab) must(args ...string) {
	l.t.Helper()
	if err := ipCmd(args...); err != nil {
		l.t.Fatalf("ip %s: %v", strings.Join(args, " "), err)
	}
}

func (l *reachLab) add(name string) string {
	ns := l.ns(name)
	l.must("netns", "add", ns)
	l.made = append(l.made, ns)
	l.must("-n", ns, "link", "set", "lo", "up")
	return ns
}

// link joins namespaces a and b with a veth pair, addresses in CIDR form.
func (l *reachLab) link(a, ifa, addrA, b, ifb, addrB string) {
	l.must("-n", a, "link", "add", ifa, "type", "veth", "peer", "name", ifb, "netns", b)
	l.must("-n", a, "addr", "add", addrA, "dev", ifa)
	l.must("-n", b, "addr", "add", addrB, "dev", ifb)
	l.must("-n", a, "link", "set", ifa, "up")
	l.must("-n", b, "link", "set", ifb, "up")
}

// nft loads an nftables ruleset into namespace ns.
func (l *reachLab) nft(ns, rules string) {
	l.t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		l.t.Fatalf("nft in %s: %v: %s", ns, err, out)
	}
}

func (l *reachLab) sysctl(ns, kv string) {
	if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", kv).CombinedOutput(); err != nil {
		l.t.Fatalf("sysctl %s in %s: %v: %s", kv, ns, err, out)
	}
}

// symmetricRouter turns ns into a router that masquerades lan traffic
// out of wan with a random source port per connection (a "symmetric"
// NAT: each destination sees another port) and lets nothing in that
// the lan did not start.
func (l *reachLab) symmetricRouter(ns, wan string) {
	l.sysctl(ns, "net.ipv4.ip_forward=1")
	l.nft(ns, fmt.Sprintf(`table ip nat {
	chain post { type nat hook postrouting priority 100; oifname %q masquerade random; }
}
table ip filter {
	chain forward_lan { type filter hook forward priority 0; policy drop;
		ct state established,related accept
		iifname != %q accept
	}
}
`, wan, wan))
}

// reachNode is a node process in a namespace.
type reachNode struct {
	*fiveNode
	ns string
}

func (l *reachLab) start(ns, p2p string, env []string, extra ...string) *reachNode {
	l.t.Helper()
	n := &fiveNode{net: &testNet{ns: "x"}, dir: l.t.TempDir()}
	wrap := []string{"ip", "netns", "exec", ns}
	if len(env) > 0 {
		wrap = append(append(wrap, "env"), env...)
	}
	n.proc, n.admin = startProcessWrapped(l.t, wrap, n.dir, append([]string{"--p2p-addr", p2p}, extra...)...)
	return &reachNode{fiveNode: n, ns: ns}
}

// call runs an HTTP call from inside the node's namespace.
func (r *reachNode) call(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	return r.callURL(t, method, "http://"+r.admin+path, body)
}

func (r *reachNode) callURL(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", r.ns, os.Args[0], "call", method, url, body)
	cmd.Env = append(os.Environ(), "PEERDNS_TEST_CLIENT=1")
	out, err := cmd.Output()
	if err != nil {
		return 0, err.Error()
	}
	status, rest, _ := strings.Cut(string(out), "\n")
	var code int
	fmt.Sscanf(status, "%d", &code)
	return code, rest
}

func (r *reachNode) invite(t *testing.T) string {
	t.Helper()
	code, body := r.call(t, "POST", "/api/invites", "")
	var v struct{ Invite string }
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil || v.Invite == "" {
		t.Fatalf("invite: %d %s", code, body)
	}
	return v.Invite
}

type reachDiag struct {
	Summary struct {
		PeerID string `json:"peerId"`
		Paths  struct {
			TCPAccepted     int64 `json:"tcpAccepted"`
			TCPBadHandshake int64 `json:"tcpBadHandshake"`
			TCPRefused      int64 `json:"tcpRefused"`
			RelayRefused    int64 `json:"relayRefusedBusy"`
			RelaySlowed     int64 `json:"relaySlowed"`
			RelayServed     int64 `json:"relayServed"`
			RelayBytes      int64 `json:"relayBytes"`
		} `json:"paths"`
		Reach struct {
			QUICRetriesFailed int64 `json:"quicRetriesFailed"`
		} `json:"reach"`
	} `json:"summary"`
	Peers []struct {
		ID        string  `json:"id"`
		State     string  `json:"state"`
		Transport string  `json:"transport"`
		Relay     string  `json:"relay"`
		RTT       float64 `json:"rttMs"`
	} `json:"peers"`
}

func (r *reachNode) diag(t *testing.T) reachDiag {
	t.Helper()
	var d reachDiag
	code, body := r.call(t, "GET", "/api/diagnostics/invites", "")
	if code != 200 || json.Unmarshal([]byte(body), &d) != nil {
		t.Fatalf("diagnostics: %d %s", code, body)
	}
	return d
}

// connectedBy waits until r is connected to peer by transport (and, when
// relay is set, through that relay) and its RTT is known.
func (r *reachNode) connectedBy(t *testing.T, within time.Duration, peer, transport, relay string) {
	t.Helper()
	testutil.Eventually(t, within, func() error {
		d := r.diag(t)
		for _, p := range d.Peers {
			if p.ID != peer {
				continue
			}
			if p.State != "connected" || p.Transport != transport || p.Relay != relay || p.RTT <= 0 {
				return fmt.Errorf("peer %.8s: state %s transport %q relay %.8s rtt %.2f ms", peer, p.State, p.Transport, p.Relay, p.RTT)
			}
			return nil
		}
		return fmt.Errorf("peer %.8s not known yet", peer)
	})
}

func (r *reachNode) id(t *testing.T) string { return r.diag(t).Summary.PeerID }

// tunnelTo serves srv's own admin API as a tunnel and has cli reach it
// through a tunnel client on cli's port lport; it returns the address
// the client listens on (inside cli's namespace).
func tunnelTo(t *testing.T, srv, cli *reachNode, domain string, lport int) string {
	t.Helper()
	_, port, _ := strings.Cut(srv.admin, ":")
	var p int
	fmt.Sscanf(port, "%d", &p)
	return tunnelToPort(t, srv, cli, domain, p, lport)
}

// tunnelToPort serves 127.0.0.1:port in srv's namespace as a tunnel that
// cli reaches on lport; it returns the client's address.
func tunnelToPort(t *testing.T, srv, cli *reachNode, domain string, port, lport int) string {
	t.Helper()
	code, body := srv.call(t, "POST", "/api/tunnel-create", fmt.Sprintf(`{"name":%q,"port":%d,"host":"127.0.0.1"}`, domain, port))
	var created struct{ ID string }
	if code != 200 || json.Unmarshal([]byte(body), &created) != nil {
		t.Fatalf("tunnel-create: %d %s", code, body)
	}
	var url string
	testutil.Eventually(t, 30*time.Second, func() error {
		_, body := srv.call(t, "GET", "/api/tunnel-servers", "")
		var list []struct {
			ID   string
			Info struct{ State, URL string }
		}
		_ = json.Unmarshal([]byte(body), &list)
		for _, s := range list {
			if s.ID == created.ID && s.Info.State == "running" && s.Info.URL != "" {
				url = s.Info.URL
				return nil
			}
		}
		return errors.New("tunnel server not running yet")
	})
	if code, body := cli.call(t, "POST", "/api/add-domain", fmt.Sprintf(`{"domain":%q,"hash":%q}`, domain, url)); code != 200 {
		t.Fatalf("add-domain: %d %s", code, body)
	}
	var cid string
	testutil.Eventually(t, 30*time.Second, func() error {
		code, body := cli.call(t, "POST", "/api/tunnel-client-create", fmt.Sprintf(`{"domain":%q,"key":%q,"port":%d}`, domain, url, lport))
		if code != 200 {
			return fmt.Errorf("tunnel-client-create: %d %s", code, body)
		}
		var c struct{ ID string }
		_ = json.Unmarshal([]byte(body), &c)
		cid = c.ID
		return nil
	})
	var addr string
	testutil.Eventually(t, 30*time.Second, func() error {
		_, body := cli.call(t, "GET", "/api/tunnel-clients", "")
		var list []struct {
			ID   string
			Info struct{ State, Address, Error string }
		}
		_ = json.Unmarshal([]byte(body), &list)
		for _, c := range list {
			if c.ID == cid && c.Info.State == "running" && c.Info.Address != "" {
				addr = c.Info.Address
				return nil
			}
			if c.ID == cid {
				return fmt.Errorf("tunnel client %s: %s %s", cid, c.Info.State, c.Info.Error)
			}
		}
		return errors.New("tunnel client not listed yet")
	})
	return addr
}

// carries checks that the tunnel at addr (in cli's namespace) reaches
// srv's admin API: its answer names srv's peer id.
func carries(t *testing.T, cli *reachNode, addr, wantID string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		code, body := cli.callURL(t, "GET", "http://"+addr+"/api/diagnostics/invites", "")
		if code != 200 || !strings.Contains(body, wantID) {
			return fmt.Errorf("through the tunnel: %d %.200s", code, body)
		}
		return nil
	})
}

// udplessPair starts node A and, in a namespace whose UDP is dropped
// (nftables table "noudp"), node B joining A.
func udplessPair(t *testing.T) (*reachLab, *reachNode, *reachNode) {
	l := newReachLab(t)
	a, b := l.add("a"), l.add("b")
	l.link(a, "v0", "198.51.100.1/24", b, "v0", "198.51.100.2/24")
	l.nft(b, `table inet noudp {
	chain in { type filter hook input priority 0; iifname "lo" accept; meta l4proto udp drop; }
	chain out { type filter hook output priority 0; oifname "lo" accept; meta l4proto udp drop; }
}
`)
	na := l.start(a, "198.51.100.1:7740", nil)
	return l, na, l.start(b, "198.51.100.2:7740", nil, "--join", na.invite(t))
}

// A node whose network drops UDP joins by invite over TCP, counts as
// connected on both sides, and carries a tunnel.
func TestReachUDPBlockedJoinsOverTCP(t *testing.T) {
	_, na, nb := udplessPair(t)
	ida, idb := na.id(t), nb.id(t)
	nb.connectedBy(t, 60*time.Second, ida, "tcp", "")
	na.connectedBy(t, 30*time.Second, idb, "tcp", "")
	if d := na.diag(t); d.Summary.Paths.TCPAccepted == 0 {
		t.Fatalf("A accepted no TCP connection: %+v", d.Summary.Paths)
	}
	// A's quorum counts B: /api/peers lists it.
	if code, body := na.call(t, "GET", "/api/peers", ""); code != 200 || !strings.Contains(body, idb) {
		t.Fatalf("A's /api/peers: %d %s", code, body)
	}
	addr := tunnelTo(t, na, nb, "udpless.p2p", 17001)
	carries(t, nb, addr, ida)

	// Garbage on A's TCP listener: closed at once, counted, and B stays.
	// A connection that finds A's pending handshakes full (B's own
	// redials, on a slow runner) is closed before the request is written
	// (the shell dies of SIGPIPE) and counted as refused: the garbage is
	// then sent again. A close with bytes of the request still unread is
	// a reset (cat reads "Connection reset by peer"): closed all the same.
	garbage := func() {
		out, err := exec.Command("ip", "netns", "exec", nb.ns, "timeout", "10", "bash", "-c",
			`exec 3<>/dev/tcp/198.51.100.1/7740; printf 'GET / HTTP/1.1\r\nHost: x\r\n\r\n' >&3; cat <&3 >/dev/null`).CombinedOutput()
		var ee *exec.ExitError
		reset := errors.As(err, &ee) && ee.ExitCode() == 1 && strings.Contains(string(out), "Connection reset by peer")
		if err != nil && !reset && !(errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGPIPE) {
			t.Fatalf("garbage connection was not closed by the node: %v %s", err, out)
		}
	}
	garbage()
	sent := time.Now()
	testutil.Eventually(t, 20*time.Second, func() error {
		p := na.diag(t).Summary.Paths
		if p.TCPBadHandshake >= 1 {
			return nil
		}
		if time.Since(sent) > 2*time.Second {
			garbage()
			sent = time.Now()
		}
		return fmt.Errorf("tcpBadHandshake = %d (refused %d)", p.TCPBadHandshake, p.TCPRefused)
	})
	carries(t, nb, addr, ida)
}

// Two nodes joined over TCP while UDP was dropped move to QUIC once UDP
// gets through again (the QUIC retry of a peer on TCP), and a tunnel
// connection open on the TCP session keeps working: the TCP connection
// drains.
func TestReachTCPPeerMovesToQUIC(t *testing.T) {
	l, na, nb := udplessPair(t)
	ida, idb := na.id(t), nb.id(t)
	nb.connectedBy(t, 60*time.Second, ida, "tcp", "")
	held := holdEcho(t, na, nb, "moves.p2p", 17300, 17005)
	// UDP stays dropped until one of B's QUIC retries has failed (the
	// first is 45 s after the TCP session came up, 60 s from the higher
	// id of the two), so the move below is the retries' doing, not the
	// first dial's QUIC attempt going on after TCP won.
	testutil.Eventually(t, 100*time.Second, func() error {
		if n := nb.diag(t).Summary.Reach.QUICRetriesFailed; n < 1 {
			return fmt.Errorf("quicRetriesFailed = %d", n)
		}
		return nil
	})
	nb.connectedBy(t, time.Second, ida, "tcp", "")
	l.nft(nb.ns, "delete table inet noudp\n")
	// The next retry, from either side, is at most a minute later.
	nb.connectedBy(t, 90*time.Second, ida, "quic", "")
	na.connectedBy(t, 10*time.Second, idb, "quic", "")
	held.line(t, "after")
	held.fresh(t, "new")
}

// Two nodes behind random-port masquerade cannot reach each other; they
// talk through the public node both joined, which sees only ciphertext,
// and carry a tunnel through it.
func TestReachSymmetricNATsRelay(t *testing.T) {
	l := newReachLab(t)
	// The public segment: a bridge in pub, the relay node's address on it.
	pub := l.publicSegment()
	r1, r2, b, c := l.add("r1"), l.add("r2"), l.add("b"), l.add("c")
	l.onPublic(pub, r1, "p1", "203.0.113.11")
	l.onPublic(pub, r2, "p2", "203.0.113.12")
	l.link(r1, "lan", "192.0.2.1/24", b, "v0", "192.0.2.2/24")
	l.link(r2, "lan", "198.51.100.1/24", c, "v0", "198.51.100.2/24")
	l.must("-n", b, "route", "add", "default", "via", "192.0.2.1")
	l.must("-n", c, "route", "add", "default", "via", "198.51.100.1")
	l.symmetricRouter(r1, "wan")
	l.symmetricRouter(r2, "wan")

	relay := l.start(pub, "203.0.113.10:7740", nil)
	nb := l.start(b, "192.0.2.2:7740", nil, "--join", relay.invite(t))
	nc := l.start(c, "198.51.100.2:7740", nil, "--join", relay.invite(t))
	idr, idb, idc := relay.id(t), nb.id(t), nc.id(t)
	nb.connectedBy(t, 60*time.Second, idr, "quic", "")
	nc.connectedBy(t, 60*time.Second, idr, "quic", "")
	nb.connectedBy(t, 30*time.Second, idc, "relayed", idr)
	nc.connectedBy(t, 30*time.Second, idb, "relayed", idr)
	for _, n := range []*reachNode{nb, nc} {
		want := idc
		if n == nc {
			want = idb
		}
		if code, body := n.call(t, "GET", "/api/peers", ""); code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/api/peers: %d %s", code, body)
		}
	}
	addr := tunnelTo(t, nc, nb, "relayed.p2p", 17002)
	carries(t, nb, addr, idc)
	if d := relay.diag(t); d.Summary.Paths.RelayServed == 0 || d.Summary.Paths.RelayBytes == 0 {
		t.Fatalf("relay counters: %+v", d.Summary.Paths)
	}
}

// publicSegment makes the lab's public segment: a bridge in ns pub with
// the address 203.0.113.10, where the public node runs.
func (l *reachLab) publicSegment() string {
	pub := l.add("pub")
	l.must("-n", pub, "link", "add", "br0", "type", "bridge")
	l.must("-n", pub, "link", "set", "br0", "up")
	l.must("-n", pub, "addr", "add", "203.0.113.10/24", "dev", "br0")
	return pub
}

// onPublic plugs ns into pub's bridge: its interface "wan" with addr
// (a 203.0.113.0/24 address), pub's end named port.
func (l *reachLab) onPublic(pub, ns, port, addr string) {
	l.must("-n", ns, "link", "add", "wan", "type", "veth", "peer", "name", port, "netns", pub)
	l.must("-n", ns, "addr", "add", addr+"/24", "dev", "wan")
	l.must("-n", ns, "link", "set", "wan", "up")
	l.must("-n", pub, "link", "set", port, "master", "br0")
	l.must("-n", pub, "link", "set", port, "up")
}

// symmetricLab builds the public segment with the relay's address and
// one random-port NAT router per private LAN (lans: their /24 prefixes,
// e.g. "192.0.2"); it returns the relay's namespace and one namespace per
// LAN holding its hosts (host h of a LAN is <prefix>.<h+2>).
func (l *reachLab) symmetricLab(lans ...string) (pub string, hosts [][]string, hostsPer int) {
	return l.routedLab(l.symmetricRouter, lans...)
}

// routedLab is symmetricLab with each LAN's router made by router.
func (l *reachLab) routedLab(router func(ns, wan string), lans ...string) (pub string, hosts [][]string, hostsPer int) {
	pub = l.publicSegment()
	for i, lan := range lans {
		r := l.add(fmt.Sprintf("r%d", i+1))
		l.onPublic(pub, r, fmt.Sprintf("p%d", i+1), fmt.Sprintf("203.0.113.%d", 11+i))
		l.must("-n", r, "link", "add", "br0", "type", "bridge")
		l.must("-n", r, "link", "set", "br0", "up")
		l.must("-n", r, "addr", "add", lan+".1/24", "dev", "br0")
		var hs []string
		for h := 0; h < 2; h++ {
			ns := l.add(fmt.Sprintf("l%dh%d", i+1, h))
			l.must("-n", r, "link", "add", fmt.Sprintf("h%d", h), "type", "veth", "peer", "name", "v0", "netns", ns)
			l.must("-n", r, "link", "set", fmt.Sprintf("h%d", h), "master", "br0")
			l.must("-n", r, "link", "set", fmt.Sprintf("h%d", h), "up")
			l.must("-n", ns, "addr", "add", fmt.Sprintf("%s.%d/24", lan, h+2), "dev", "v0")
			l.must("-n", ns, "link", "set", "v0", "up")
			l.must("-n", ns, "route", "add", "default", "via", lan+".1")
			hs = append(hs, ns)
		}
		hosts = append(hosts, hs)
		router(r, "wan")
	}
	return pub, hosts, 2
}

// A relay at its budget: with room for one relayed connection, a second
// pair that needs one is refused (and counted), and the relayed pair's
// bulk data over the byte-rate cap is slowed (and counted), not dropped.
func TestReachRelayAtBudget(t *testing.T) {
	l := newReachLab(t)
	if _, err := exec.LookPath("socat"); err != nil {
		t.Skip("needs socat (apt-get install socat)")
	}
	pub, hosts, _ := l.symmetricLab("192.0.2", "198.51.100")
	relay := l.start(pub, "203.0.113.10:7740", []string{"RELAY_MAX_CONNS=1", "RELAY_MAX_MBPS=2"})
	nb := l.start(hosts[0][0], "192.0.2.2:7740", nil, "--join", relay.invite(t))
	nc := l.start(hosts[1][0], "198.51.100.2:7740", nil, "--join", relay.invite(t))
	nd := l.start(hosts[1][1], "198.51.100.3:7740", nil, "--join", relay.invite(t))
	idr, idd := relay.id(t), nd.id(t)
	// C and D share a LAN: direct. B needs the relay for both; it has
	// room for one.
	nc.connectedBy(t, 60*time.Second, idd, "quic", "")
	var relayed *reachNode
	var relayedID string
	testutil.Eventually(t, 60*time.Second, func() error {
		for _, p := range nb.diag(t).Peers {
			if p.State == "connected" && p.Transport == "relayed" && p.Relay == idr {
				relayedID = p.ID
				relayed = nc
				if p.ID == idd {
					relayed = nd
				}
				return nil
			}
		}
		return errors.New("B has no relayed peer yet")
	})
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := relay.diag(t).Summary.Paths.RelayRefused; n < 1 {
			return fmt.Errorf("relayRefusedBusy = %d", n)
		}
		return nil
	})
	for _, p := range nb.diag(t).Peers {
		if p.ID != relayedID && p.ID != idr && p.State == "connected" {
			t.Fatalf("B is connected to %.8s over %s although the relay is full", p.ID, p.Transport)
		}
	}
	// 1 MB through a tunnel over the relayed pair at 2 Mbit/s.
	src := exec.Command("ip", "netns", "exec", relayed.ns, "socat", "TCP-LISTEN:17100,bind=127.0.0.1,reuseaddr,fork", "SYSTEM:head -c 1000000 /dev/zero")
	if err := src.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Process.Kill(); _ = src.Wait() })
	addr := tunnelToPort(t, relayed, nb, "bulk.p2p", 17100, 17003)
	out, err := exec.Command("ip", "netns", "exec", nb.ns, "timeout", "60", "bash", "-c",
		fmt.Sprintf("exec 3<>/dev/tcp/%s; wc -c <&3", strings.Replace(addr, ":", "/", 1))).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "1000000" {
		t.Fatalf("bulk through the relayed tunnel: %v %q", err, out)
	}
	if d := relay.diag(t); d.Summary.Paths.RelaySlowed == 0 {
		t.Fatalf("1 MB at 2 Mbit/s was not slowed: %+v", d.Summary.Paths)
	}
}

// A relayed pair keeps dialing directly: once the routers let the two
// LANs reach each other, the pair moves to a direct QUIC connection, and
// a tunnel connection that was open on the relayed one keeps working.
func TestReachRelayedMovesToDirect(t *testing.T) {
	l := newReachLab(t)
	pub, hosts, _ := l.symmetricLab("192.0.2", "198.51.100")
	relay := l.start(pub, "203.0.113.10:7740", nil)
	nb := l.start(hosts[0][0], "192.0.2.2:7740", nil, "--join", relay.invite(t))
	nc := l.start(hosts[1][0], "198.51.100.2:7740", nil, "--join", relay.invite(t))
	idr, idb, idc := relay.id(t), nb.id(t), nc.id(t)
	nb.connectedBy(t, 60*time.Second, idc, "relayed", idr)
	held := holdEcho(t, nc, nb, "echo.p2p", 17200, 17004)
	// Open a routed path between the LANs (no masquerade between them).
	l.must("-n", l.ns("r1"), "route", "add", "198.51.100.0/24", "via", "203.0.113.12")
	l.must("-n", l.ns("r2"), "route", "add", "192.0.2.0/24", "via", "203.0.113.11")
	for r, other := range map[string]string{"r1": "198.51.100.0/24", "r2": "192.0.2.0/24"} {
		l.nft(l.ns(r), fmt.Sprintf("insert rule ip nat post ip daddr %s accept\ninsert rule ip filter forward_lan ip saddr %s accept\n", other, other))
	}
	// The move can go through TCP first: the routers' UDP mappings from
	// the direct QUIC dials made while the LANs could not reach each
	// other still rewrite QUIC packets until they expire (30 s after
	// their last packet), while TCP dials leave from fresh ports. The
	// pair then retries QUIC 45 s after its TCP session came up.
	nb.connectedBy(t, 150*time.Second, idc, "quic", "")
	nc.connectedBy(t, 30*time.Second, idb, "quic", "")
	held.line(t, "after")
	held.fresh(t, "new")
}

// heldEcho is one tunnel connection to an echo server, held open.
type heldEcho struct {
	cli   *reachNode
	addr  string
	stdin io.Writer
	out   *syncWriter
}

// holdEcho starts an echo server (socat) in srv's namespace, a tunnel to
// it from cli, and opens one connection through the tunnel that stays
// open, checked with a first line.
func holdEcho(t *testing.T, srv, cli *reachNode, domain string, port, lport int) *heldEcho {
	t.Helper()
	if _, err := exec.LookPath("socat"); err != nil {
		t.Fatal("needs socat (apt-get install socat)")
	}
	echo := exec.Command("ip", "netns", "exec", srv.ns, "socat", fmt.Sprintf("TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork", port), "EXEC:cat")
	if err := echo.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = echo.Process.Kill(); _ = echo.Wait() })
	h := &heldEcho{cli: cli, addr: tunnelToPort(t, srv, cli, domain, port, lport), out: &syncWriter{b: &strings.Builder{}}}
	conn := exec.Command("ip", "netns", "exec", cli.ns, "socat", "-", "TCP:"+h.addr)
	stdin, err := conn.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	h.stdin, conn.Stdout = stdin, h.out
	if err := conn.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Process.Kill(); _ = conn.Wait() })
	h.line(t, "before")
	return h
}

// line sends s on the held connection and waits for its echo.
func (h *heldEcho) line(t *testing.T, s string) {
	t.Helper()
	fmt.Fprintln(h.stdin, s)
	testutil.Eventually(t, 20*time.Second, func() error {
		if !strings.Contains(h.out.String(), s) {
			return fmt.Errorf("the held tunnel connection does not echo %q: %q", s, h.out.String())
		}
		return nil
	})
}

// fresh checks that a new connection through the tunnel echoes s.
func (h *heldEcho) fresh(t *testing.T, s string) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", h.cli.ns, "bash", "-c",
		fmt.Sprintf("echo %s | timeout 10 socat -t 2 - TCP:%s", s, h.addr)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), s) {
		t.Fatalf("new tunnel connection: %v %q", err, out)
	}
}

// syncWriter is a strings.Builder safe for a writer and a reader.
type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
