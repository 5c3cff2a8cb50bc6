//go:build linux

package natlab

// The "pmp" router: the eim router's masquerade and filter (replies only
// come in), plus miniupnpd answering NAT-PMP/PCP on the LAN and writing
// its own port forwards into the router's nftables. It is the home
// router that lets a node map its port.
//
// miniupnpd refuses to forward ports when its WAN address is private or
// reserved, and the lab's public segment is a documentation range
// (203.0.113.0/24, reserved): it says "Port forwarding is impossible" and
// answers every mapping request with "network failure", and refuses such
// an address in ext_ip= outright. What it accepts is a STUN check
// (ext_perform_stun): a STUN server that answers from a second address
// and port (CHANGE-REQUEST, RFC 3489) proves nothing upstream filters the
// WAN, and miniupnpd then forwards. So the public segment gets a real
// STUN server, stund (package stun-server), on two addresses of its own,
// 203.0.113.1 and .2, started with the first pmp router.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Places behind a router that maps ports on request, otherwise like EIM:
// PMP answers NAT-PMP/PCP, UPnP answers UPnP IGD (SSDP and SOAP) only.
const (
	PMP  Kind = "pmp"
	UPnP Kind = "upnp"
)

// mapsPorts reports whether routers of kind k run miniupnpd.
func mapsPorts(k Kind) bool { return k == PMP || k == UPnP }

// STUN addresses on the public segment (stund's primary and alternate).
const (
	stunIP    = "203.0.113.1"
	stunAltIP = "203.0.113.2"
)

// PMPAvailable says why the pmp router cannot be built here ("" when it
// can).
func PMPAvailable() string {
	if why := Available(); why != "" {
		return why
	}
	for tool, pkg := range map[string]string{"miniupnpd": "miniupnpd-nftables", "stund": "stun-server"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("the pmp router needs %s: apt-get install %s", tool, pkg)
		}
	}
	return ""
}

// pmpRuleset is the pmp router's nftables: one inet table with the
// chains miniupnpd fills (its defaults: table "filter", chains
// "miniupnpd", "prerouting_miniupnpd", "postrouting_miniupnpd"), the
// eim router's masquerade after miniupnpd's own source NAT, and a
// forward filter that lets in replies and what miniupnpd forwards only.
// The router's own input is open: STUN answers from the second address
// and NAT-PMP requests from the LAN reach it.
func pmpRuleset() string {
	return `table inet filter {
  chain forward { type filter hook forward priority filter; policy drop;
    iifname "lan" oifname "wan" accept
    iifname "wan" oifname "lan" ct state established,related accept
    jump miniupnpd
  }
  chain miniupnpd { }
  chain prerouting { type nat hook prerouting priority dstnat; policy accept; jump prerouting_miniupnpd; }
  chain postrouting { type nat hook postrouting priority srcnat; policy accept; jump postrouting_miniupnpd; oifname "wan" masquerade; }
  chain prerouting_miniupnpd { }
  chain postrouting_miniupnpd { }
}
`
}

// startSTUN runs stund on the public segment (once per lab).
func (l *Lab) startSTUN() error {
	if l.stun {
		return nil
	}
	for _, ip := range []string{stunIP, stunAltIP} {
		if err := run("ip", "-n", l.inet, "addr", "add", ip+"/24", "dev", "br0"); err != nil {
			return err
		}
	}
	cmd := exec.Command("ip", "netns", "exec", l.inet, "stund", "-h", stunIP, "-a", stunAltIP)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("stund: %w", err)
	}
	l.procs = append(l.procs, cmd)
	l.stun = true
	// miniupnpd sends its STUN requests once at start and exits when
	// none is answered: wait for stund's four sockets.
	return poll(5*time.Second, func() error {
		out, err := exec.Command("ip", "netns", "exec", l.inet, "ss", "-Hlun").CombinedOutput()
		if err != nil {
			return fmt.Errorf("ss: %v: %s", err, out)
		}
		if n := strings.Count(string(out), ":347"); n < 4 {
			return fmt.Errorf("stund has %d of its 4 sockets open", n)
		}
		return nil
	})
}

// poll calls f every 50 ms until it returns nil, or returns its last
// error after within.
func poll(within time.Duration, f func() error) error {
	return Poll(within, 50*time.Millisecond, f)
}

// startMiniupnpd runs miniupnpd in router namespace r (LAN lanNet) with
// its config, pid and lease files in the lab's folder, and returns once
// it forwards ports (its STUN check passed) and listens for NAT-PMP.
func (l *Lab) startMiniupnpd(r, lanNet string, k Kind) error {
	if err := l.startSTUN(); err != nil {
		return err
	}
	// The router's WAN link must carry packets before miniupnpd's one
	// STUN check (a veth just set up may refuse them for a moment).
	if err := l.PinNeighbours(); err != nil {
		return err
	}
	if err := poll(15*time.Second, func() error { return run("ip", "netns", "exec", r, "ping", "-c1", "-W1", "-q", stunIP) }); err != nil {
		return fmt.Errorf("router %s cannot reach the STUN server: %w", r, err)
	}
	if l.dir == "" {
		d, err := os.MkdirTemp("", l.prefix+"-pmp")
		if err != nil {
			return err
		}
		l.dir = d
	}
	conf := filepath.Join(l.dir, r+".conf")
	// secure_mode: a client maps only to its own address; the permission
	// rules allow the LAN's unprivileged ports and nothing else.
	body := strings.Join([]string{
		"ext_ifname=wan",
		"listening_ip=lan",
		"enable_natpmp=" + yesNo(k == PMP),
		"enable_upnp=" + yesNo(k == UPnP),
		"secure_mode=yes",
		"ext_perform_stun=yes",
		"ext_stun_host=" + stunIP,
		"ext_stun_port=3478",
		"lease_file=" + filepath.Join(l.dir, r+".leases"),
		"allow 1024-65535 " + lanNet + " 1024-65535",
		"deny 0-65535 0.0.0.0/0 0-65535",
		"force_igd_desc_v1=" + yesNo(l.UPnPv1),
		"",
	}, "\n")
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		return err
	}
	cmd := exec.Command("ip", "netns", "exec", r, "miniupnpd", "-d", "-f", conf, "-P", filepath.Join(l.dir, r+".pid"))
	out, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("miniupnpd: %w", err)
	}
	l.procs = append(l.procs, cmd)
	logf, err := os.Create(filepath.Join(l.dir, r+".log"))
	if err != nil {
		return err
	}
	ready := make(chan struct{})
	ready4 := "Listening for NAT-PMP/PCP traffic"
	if k == UPnP {
		ready4 = "HTTP listening on port"
	}
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(out)
		forwarding, listening, closed := false, false, false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			forwarding = forwarding || strings.Contains(line, "Port forwarding is now enabled")
			listening = listening || strings.Contains(line, ready4)
			if forwarding && listening && !closed {
				close(ready)
				closed = true
			}
		}
	}()
	select {
	case <-ready:
		return nil
	case <-time.After(15 * time.Second):
		return fmt.Errorf("miniupnpd in %s did not enable port forwarding within 15s:\n%s", r, l.RouterLog(r))
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// RouterLog is what miniupnpd in router namespace r logged so far.
func (l *Lab) RouterLog(r string) string {
	if l.dir == "" {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(l.dir, r+".log"))
	return string(b)
}

// Router is the namespace of the router in front of place p.
func (l *Lab) Router(p *Place) string { return strings.Replace(p.NS, "-n", "-r", 1) }

// NFT lists an nftables object in namespace ns ("chain inet filter
// prerouting_miniupnpd").
func NFT(ns, object string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns, "nft", "list"}, strings.Fields(object)...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("nft list %s in %s: %v: %s", object, ns, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// stopProcs ends the lab's daemons (SIGTERM: miniupnpd removes its own
// rules; SIGKILL after 5 s) and removes the lab's folder.
func (l *Lab) stopProcs() {
	for i := len(l.procs) - 1; i >= 0; i-- {
		c := l.procs[i]
		_ = c.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
	l.procs = nil
	if l.dir != "" {
		_ = os.RemoveAll(l.dir)
		l.dir = ""
	}
}

// PinNeighbours adds a permanent ARP entry, in every namespace of the
// lab, for every lab address on a link it shares. Why: on this kernel
// the neighbour table's limits (gc_thresh3, 1024 entries) count the
// entries of every namespace on the host together, and a host busy with
// other labs fills it: new entries then fail ("neighbor table overflow",
// sendmsg ENOBUFS) and the lab's first packets vanish. Permanent entries
// are exempt from those limits, so a pinned lab works whatever else the
// host runs. The host's own tables are never touched.
func (l *Lab) PinNeighbours() error {
	type ifc struct {
		ns, dev, mac string
		addrs        []netip.Prefix
	}
	var all []ifc
	for _, ns := range l.ns {
		out, err := exec.Command("ip", "-j", "-n", ns, "addr").Output()
		if err != nil {
			return fmt.Errorf("ip -j -n %s addr: %w", ns, err)
		}
		var links []struct {
			Name string `json:"ifname"`
			MAC  string `json:"address"`
			Info []struct {
				Family string `json:"family"`
				Local  string `json:"local"`
				Len    int    `json:"prefixlen"`
			} `json:"addr_info"`
		}
		if err := json.Unmarshal(out, &links); err != nil {
			return fmt.Errorf("ip -j -n %s addr: %w", ns, err)
		}
		for _, k := range links {
			if k.Name == "lo" || k.MAC == "" {
				continue
			}
			f := ifc{ns: ns, dev: k.Name, mac: k.MAC}
			for _, a := range k.Info {
				if p, err := netip.ParsePrefix(fmt.Sprintf("%s/%d", a.Local, a.Len)); err == nil && a.Family == "inet" {
					f.addrs = append(f.addrs, p)
				}
			}
			if len(f.addrs) > 0 {
				all = append(all, f)
			}
		}
	}
	// One `ip -batch` per namespace: a lab of fifty nodes has 2,450
	// entries to add.
	batch := map[string]*strings.Builder{}
	for _, a := range all {
		for _, b := range all {
			if a.ns == b.ns {
				continue
			}
			for _, pa := range a.addrs {
				for _, pb := range b.addrs {
					if !pa.Masked().Contains(pb.Addr()) {
						continue
					}
					if batch[a.ns] == nil {
						batch[a.ns] = &strings.Builder{}
					}
					fmt.Fprintf(batch[a.ns], "neigh replace %s lladdr %s dev %s nud permanent\n", pb.Addr(), b.mac, a.dev)
				}
			}
		}
	}
	for ns, b := range batch {
		cmd := exec.Command("ip", "-n", ns, "-batch", "-")
		cmd.Stdin = strings.NewReader(b.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("neighbours of %s: %v: %s", ns, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
