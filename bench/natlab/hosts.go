//go:build linux

package natlab

import (
	"fmt"
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
