//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"peerdns/bench/natlab"
)

// Table is the result as printed: one row per step.
func (r *Result) Table(cfg Config) string {
	var b strings.Builder
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&b, "\n%d peerdns node processes, seed %d, load average at the end %s\n", cfg.Nodes, cfg.Seed, strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	fmt.Fprintf(&b, "| step | what it did and measured |\n|---|---|\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %s |\n", row[0], row[1])
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "| FAILED | %s |\n", f)
	}
	return b.String()
}

// available says why the fleet cannot run here ("" when it can): root,
// ip and nft, network namespaces, and nftables' bridge family (the
// partition) must all be there.
func available() string {
	if os.Geteuid() != 0 {
		return "needs root (network namespaces, nftables): run as root, as CI does"
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("needs %s: apt-get install iproute2 nftables", tool)
		}
	}
	ns := fmt.Sprintf("f50-chk%d", os.Getpid()%100000)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return fmt.Sprintf("network namespaces refused here (%v: %s): run as root with CAP_SYS_ADMIN", err, strings.TrimSpace(string(out)))
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	if err := natlab.Nft(ns, "table bridge f50chk {\n chain forward { type filter hook forward priority filter; policy accept; }\n}\n"); err != nil {
		return "nftables bridge family refused here (" + err.Error() + "): needs nf_tables with bridge support"
	}
	return ""
}
