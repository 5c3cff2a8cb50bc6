//go:build linux

// Package natlab builds a lab of NAT routers in network namespaces and
// runs real `peerdns node` processes behind them, to check and measure
// how peers reach each other: which pairs connect, by which path, how
// fast, and whether a tunnel carries data between them.
//
// The lab: one "internet" namespace holding a bridge, the public segment
// 203.0.113.0/24. A public node sits on it directly (203.0.113.10+i). A
// node behind a router lives in its own namespace with a LAN of its own
// (198.51.100.16i/28: router .16i+1, node .16i+2); the router's WAN is
// 203.0.113.100+i. Routers, in nftables:
//
//   - eim: masquerade on the WAN (Linux keeps the source port when it can:
//     one mapping for every destination, "endpoint-independent"), and a
//     forward filter that lets in only replies to what went out (the
//     usual home router);
//   - sym: masquerade with random ports: a new mapping per destination
//     ("symmetric");
//   - noudp: as eim, but UDP from the LAN is dropped;
//   - pmp, upnp: as eim, plus miniupnpd mapping ports on request
//     (NAT-PMP or UPnP IGD, pmp.go), with a STUN server on the public
//     segment.
//
// Only documentation ranges are used, no namespace has a route out, and
// the host's own interfaces, routes and nftables are never touched: every
// link is made inside the lab's namespaces. Everything is deleted at
// Close, also after a failure.
//
// The test process talks to each node's admin API (on the node's own
// loopback) and to tunnel ports through sockets it opens inside the
// node's namespace (setns on a locked thread that is then thrown away).
package natlab

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Kind is where a lab node sits.
type Kind string

// Node kinds.
const (
	Public Kind = "public" // on the public segment, no NAT
	EIM    Kind = "eim"    // behind an endpoint-independent masquerade
	Sym    Kind = "sym"    // behind a random-port ("symmetric") masquerade
	NoUDP  Kind = "noudp"  // behind a router that drops UDP
)

// Lab is one set of namespaces.
type Lab struct {
	prefix string
	inet   string
	ns     []string // every namespace made, deleted at Close
	next   int      // node index
	// pmp routers (pmp.go): daemons to stop at Close, the folder of
	// their files, whether stund runs.
	procs []*exec.Cmd
	dir   string
	stun  bool
	// UPnPv1: UPnP routers added from now on describe themselves as
	// IGDv1 (miniupnpd's force_igd_desc_v1), as many home routers do:
	// WANIPConnection:1, without AddAnyPortMapping.
	UPnPv1 bool
}

// Available says why the lab cannot run here ("" when it can).
func Available() string {
	if os.Geteuid() != 0 {
		return "natlab needs root (network namespaces and nftables): run as root, as CI does"
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("natlab needs %s: apt-get install iproute2 nftables", tool)
		}
	}
	// Root in a container may still be refused namespaces or nftables.
	ns := fmt.Sprintf("pra-chk%d", os.Getpid()%100000)
	if err := run("ip", "netns", "add", ns); err != nil {
		return "natlab: network namespaces refused here (" + err.Error() + "): run as root with CAP_SYS_ADMIN"
	}
	defer run("ip", "netns", "del", ns)
	if err := nft(ns, "table ip natlab {\n chain lab_post { type nat hook postrouting priority srcnat; masquerade random; }\n}\n"); err != nil {
		return "natlab: nftables NAT refused here (" + err.Error() + "): needs the nf_nat modules"
	}
	return ""
}

// New makes the public segment. prefix names every namespace (keep it
// short and unique: "pra-1234").
func New(prefix string) (*Lab, error) {
	l := &Lab{prefix: prefix, inet: prefix + "-inet"}
	if err := l.addNS(l.inet); err != nil {
		return nil, err
	}
	err := run("ip", "-n", l.inet, "link", "add", "br0", "type", "bridge")
	if err == nil {
		err = run("ip", "-n", l.inet, "link", "set", "br0", "up")
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Lab) addNS(name string) error {
	if err := run("ip", "netns", "add", name); err != nil {
		return err
	}
	l.ns = append(l.ns, name)
	return run("ip", "-n", name, "link", "set", "lo", "up")
}

// Close deletes every namespace of the lab (processes in them must be
// stopped first).
func (l *Lab) Close() {
	l.stopProcs()
	for i := len(l.ns) - 1; i >= 0; i-- {
		_ = run("ip", "netns", "del", l.ns[i])
	}
	l.ns = nil
}

// Place is where a node runs: its namespace and its address there.
type Place struct {
	Kind Kind
	NS   string // the node's namespace
	IP   string // the node's own interface address
	WAN  string // the router's public address ("" for a public node)
}

// Add makes a place of kind k for one node.
func (l *Lab) Add(k Kind) (*Place, error) {
	i := l.next
	l.next++
	if i > 14 {
		return nil, fmt.Errorf("natlab: at most 15 nodes")
	}
	ns := fmt.Sprintf("%s-n%d", l.prefix, i)
	if err := l.addNS(ns); err != nil {
		return nil, err
	}
	if k == Public {
		ip := fmt.Sprintf("203.0.113.%d", 10+i)
		if err := l.plug(ns, "eth0", fmt.Sprintf("p%d", i), ip+"/24"); err != nil {
			return nil, err
		}
		return &Place{Kind: k, NS: ns, IP: ip}, nil
	}
	r := fmt.Sprintf("%s-r%d", l.prefix, i)
	if err := l.addNS(r); err != nil {
		return nil, err
	}
	wan := fmt.Sprintf("203.0.113.%d", 100+i)
	if err := l.plug(r, "wan", fmt.Sprintf("w%d", i), wan+"/24"); err != nil {
		return nil, err
	}
	gw, ip := fmt.Sprintf("198.51.100.%d", 16*i+1), fmt.Sprintf("198.51.100.%d", 16*i+2)
	steps := [][]string{
		{"ip", "-n", r, "link", "add", "lan", "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "-n", r, "addr", "add", gw + "/28", "dev", "lan"},
		{"ip", "-n", r, "link", "set", "lan", "up"},
		{"ip", "-n", ns, "addr", "add", ip + "/28", "dev", "eth0"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
		{"ip", "-n", ns, "route", "add", "default", "via", gw},
		{"ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return nil, err
		}
	}
	if err := nft(r, ruleset(k)); err != nil {
		return nil, err
	}
	if mapsPorts(k) {
		if err := l.startMiniupnpd(r, fmt.Sprintf("198.51.100.%d/28", 16*i), k); err != nil {
			return nil, err
		}
	}
	return &Place{Kind: k, NS: ns, IP: ip, WAN: wan}, nil
}

// plug connects namespace ns to the public bridge with a veth named dev
// inside ns (port on the bridge side), addressed cidr.
func (l *Lab) plug(ns, dev, port, cidr string) error {
	steps := [][]string{
		{"ip", "-n", l.inet, "link", "add", port, "type", "veth", "peer", "name", dev, "netns", ns},
		{"ip", "-n", l.inet, "link", "set", port, "master", "br0"},
		{"ip", "-n", l.inet, "link", "set", port, "up"},
		{"ip", "-n", ns, "addr", "add", cidr, "dev", dev},
		{"ip", "-n", ns, "link", "set", dev, "up"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// ruleset is the router's nftables ruleset for kind k.
func ruleset(k Kind) string {
	if mapsPorts(k) {
		return pmpRuleset()
	}
	masq := "masquerade"
	if k == Sym {
		masq = "masquerade random"
	}
	var b strings.Builder
	b.WriteString("table ip natlab {\n")
	b.WriteString("  chain lab_post { type nat hook postrouting priority srcnat; policy accept; oifname \"wan\" " + masq + "; }\n")
	b.WriteString("  chain lab_forward { type filter hook forward priority filter; policy drop;\n")
	if k == NoUDP {
		b.WriteString("    iifname \"lan\" meta l4proto udp drop\n")
	}
	b.WriteString("    iifname \"lan\" oifname \"wan\" accept\n")
	b.WriteString("    iifname \"wan\" oifname \"lan\" ct state established,related accept\n")
	b.WriteString("  }\n")
	b.WriteString("  chain lab_input { type filter hook input priority filter; policy accept; iifname \"wan\" meta l4proto udp drop; }\n")
	b.WriteString("}\n")
	return b.String()
}

func nft(ns, rules string) error {
	cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %v: %s", ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// InNS runs f on an OS thread moved into namespace ns. The thread is
// never moved back: it ends with its goroutine (runtime.LockOSThread
// without Unlock), so no other goroutine ever runs in the lab's
// namespace by accident. Sockets f opens stay in ns.
func InNS(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open namespace %s: %w", ns, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter namespace %s: %w", ns, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}
