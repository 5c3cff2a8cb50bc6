//go:build linux

package natlab

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
)

// AddPublicHost makes a place on the public segment at address ip (in
// 203.0.113.0/24, chosen by the caller), for labs of more nodes than
// Add's fifteen. Its namespace is <prefix>-h<k> and its bridge port h<k>,
// k unique in the lab, so these never clash with the names Add makes
// (the addresses are the caller's to keep apart from Add's .10-.24 and
// .100-.114).
func (l *Lab) AddPublicHost(ip string) (*Place, error) {
	k := len(l.ns)
	ns := fmt.Sprintf("%s-h%d", l.prefix, k)
	if err := l.addNS(ns); err != nil {
		return nil, err
	}
	if err := l.plug(ns, "eth0", fmt.Sprintf("h%d", k), ip+"/24"); err != nil {
		return nil, err
	}
	return &Place{Kind: Public, NS: ns, IP: ip}, nil
}

// Inet is the namespace that holds the public bridge (br0): rules of the
// nftables bridge family there act on traffic between every pair of
// places on the segment.
func (l *Lab) Inet() string { return l.inet }

// Nft loads a ruleset into namespace ns (`nft -f -` run inside it).
func Nft(ns, rules string) error { return nft(ns, rules) }

// Kill ends the process with SIGKILL (a crash: nothing is flushed or
// said to peers) and waits for it to exit. The data folder stays, so
// Start on the same folder without an invite brings the node back.
func (n *Node) Kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	_ = n.cmd.Wait()
	n.cmd = nil
	if n.log != nil {
		n.log.Close()
	}
	n.http.CloseIdleConnections()
}

// Pid is the node process's id (0 once stopped). `ip netns exec`
// executes the node in its own place, so this is the node itself.
func (n *Node) Pid() int {
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Dir is the folder Start was given (node.log, data/).
func (n *Node) Dir() string { return n.dir }

// StaticNeighbours gives every place in places a permanent neighbour
// (ARP) entry for each of the others' addresses on the public segment.
// The kernel's IPv4 neighbour table is one for all network namespaces,
// capped by the host's net.ipv4.neigh.default.gc_thresh3 (1,024 by
// default): a lab of fifty nodes that talk to each other fills it ("arp_cache:
// neighbor table overflow!" in the kernel log, then "no route to host"
// and lost packets, in this lab and in every other namespace on the
// machine). Permanent entries do not count against that cap (Linux 5.0
// and later), and the host's own settings stay as they are.
func StaticNeighbours(places []*Place) error {
	macs := make([]string, len(places))
	for i, p := range places {
		out, err := exec.Command("ip", "-n", p.NS, "-o", "link", "show", "eth0").Output()
		if err != nil {
			return fmt.Errorf("eth0 of %s: %w", p.NS, err)
		}
		f := strings.Fields(string(out))
		for k := 0; k+1 < len(f); k++ {
			if f[k] == "link/ether" {
				macs[i] = f[k+1]
			}
		}
		if macs[i] == "" {
			return fmt.Errorf("no MAC address on eth0 of %s: %s", p.NS, out)
		}
	}
	for i, p := range places {
		var b strings.Builder
		for j, q := range places {
			if j != i {
				fmt.Fprintf(&b, "neigh replace %s lladdr %s dev eth0 nud permanent\n", q.IP, macs[j])
			}
		}
		cmd := exec.Command("ip", "-n", p.NS, "-batch", "-")
		cmd.Stdin = strings.NewReader(b.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("neighbours of %s: %v: %s", p.NS, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
