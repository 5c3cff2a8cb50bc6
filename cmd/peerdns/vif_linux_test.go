package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// vifLab is three network namespaces made by the test (prefix pcv-, or
// PEERDNS_TEST_NETNS_PREFIX): a bridge, the node's host and another host
// of the same LAN (198.51.100.0/24, a documentation range, with no route
// out).
type vifLab struct{ br, node, lan string }

const (
	vifNodeIP = "198.51.100.1"
	vifLANIP  = "198.51.100.2"
)

func newVIFLab(t *testing.T) *vifLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("virtual interfaces need root to make network namespaces: run the test as root (CI does)")
	}
	for _, tool := range []string{"ip", "socat"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: apt-get install %s", tool, map[string]string{"ip": "iproute2", "socat": "socat"}[tool])
		}
	}
	// PEERDNS_TEST_NETNS_PREFIX replaces the prefix, so that people
	// testing on one machine at once can tell their namespaces apart.
	prefix := os.Getenv("PEERDNS_TEST_NETNS_PREFIX")
	if prefix == "" {
		prefix = "pcv"
	}
	p := fmt.Sprintf("%s-%d", prefix, os.Getpid()%100000)
	l := &vifLab{br: p + "-br", node: p + "-node", lan: p + "-lan"}
	if err := ipCmd("netns", "add", l.br); err != nil {
		t.Skipf("cannot make network namespaces here (%v): run as root on a kernel with netns", err)
	}
	t.Cleanup(func() {
		for _, ns := range []string{l.node, l.lan, l.br} {
			_ = ipCmd("netns", "del", ns)
		}
	})
	must := func(args ...string) {
		t.Helper()
		if err := ipCmd(args...); err != nil {
			t.Fatalf("ip %s: %v", strings.Join(args, " "), err)
		}
	}
	must("-n", l.br, "link", "add", "br0", "type", "bridge")
	must("-n", l.br, "link", "set", "br0", "up")
	for i, h := range []struct{ ns, ip string }{{l.node, vifNodeIP}, {l.lan, vifLANIP}} {
		port := fmt.Sprintf("p%d", i)
		must("netns", "add", h.ns)
		must("-n", h.ns, "link", "add", "v0", "type", "veth", "peer", "name", port, "netns", l.br)
		must("-n", l.br, "link", "set", port, "master", "br0")
		must("-n", l.br, "link", "set", port, "up")
		must("-n", h.ns, "addr", "add", h.ip+"/24", "dev", "v0")
		must("-n", h.ns, "link", "set", "v0", "up")
		must("-n", h.ns, "link", "set", "lo", "up")
	}
	return l
}

// in is the command prefix that runs a program in namespace ns.
func in(ns string) []string { return []string{"ip", "netns", "exec", ns} }

// nsCall calls the admin API at addr from inside namespace ns.
func nsCall(t *testing.T, ns, addr, method, path, body string) (int, string) {
	t.Helper()
	argv := append(in(ns), os.Args[0], "call", method, "http://"+addr+path, body)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PEERDNS_TEST_CLIENT=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s in %s: %v", method, path, ns, err)
	}
	status, rest, _ := strings.Cut(string(out), "\n")
	var code int
	fmt.Sscanf(status, "%d", &code)
	return code, rest
}

func nsJSON(t *testing.T, ns, addr, method, path, body string, v any) {
	t.Helper()
	code, got := nsCall(t, ns, addr, method, path, body)
	if code != 200 {
		t.Fatalf("%s %s %s = %d %q", method, path, body, code, got)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(got), v); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, got, err)
		}
	}
}

// addrsOn is `ip addr show dev` of dev in ns ("" when there is no such
// link).
func addrsOn(ns, dev string) string {
	out, err := exec.Command("ip", "-n", ns, "-o", "addr", "show", "dev", dev).CombinedOutput()
	if err != nil {
		return ""
	}
	return string(out)
}

// serveBanner runs a TCP server in ns on 127.0.0.1:port that writes
// line to every connection.
func serveBanner(t *testing.T, ns string, port int, line string) {
	t.Helper()
	argv := append(in(ns), "socat", fmt.Sprintf("TCP-LISTEN:%d,bind=127.0.0.1,fork,reuseaddr", port), "SYSTEM:echo "+line)
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

// bannerFrom connects from ns to addr and returns the line read.
func bannerFrom(ns, addr string) (string, error) {
	argv := append(in(ns), "socat", "-T", "5", "-", "TCP:"+addr+",connect-timeout=3")
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// lanTunnel makes a tunnel server for the banner port, claims domain with
// it and creates a tunnel client of the domain on port; it returns the
// client's id.
func lanTunnel(t *testing.T, ns, admin, domain string, banner, port int) string {
	t.Helper()
	var created struct{ ID string }
	nsJSON(t, ns, admin, "POST", "/api/tunnel-create", fmt.Sprintf(`{"port":%d}`, banner), &created)
	var url string
	testutil.Eventually(t, 20*time.Second, func() error {
		var ss []messages.TunnelServer
		nsJSON(t, ns, admin, "GET", "/api/tunnel-servers", "", &ss)
		for _, s := range ss {
			if s.ID == created.ID && s.Info.URL != "" {
				url = s.Info.URL
				return nil
			}
		}
		return fmt.Errorf("tunnel server not running: %+v", ss)
	})
	nsJSON(t, ns, admin, "POST", "/api/add-domain", fmt.Sprintf(`{"domain":%q,"hash":%q}`, domain, url), nil)
	var cl struct{ ID string }
	testutil.Eventually(t, 20*time.Second, func() error {
		code, body := nsCall(t, ns, admin, "POST", "/api/tunnel-client-create", fmt.Sprintf(`{"domain":%q,"key":%q,"port":%d}`, domain, url, port))
		if code != 200 {
			return fmt.Errorf("tunnel-client-create = %d %s", code, body)
		}
		return json.Unmarshal([]byte(body), &cl)
	})
	return cl.ID
}

func clientInfo(t *testing.T, ns, admin, id string) messages.TunnelClientInfo {
	var cs []messages.TunnelClient
	nsJSON(t, ns, admin, "GET", "/api/tunnel-clients", "", &cs)
	for _, c := range cs {
		if c.ID == id {
			return c.Info
		}
	}
	return messages.TunnelClientInfo{}
}

// A node whose subnet is a LAN range (198.51.100.0/24, saved through
// POST /api/subnets and the node restarted, as an operator does it) owns
// peerdns0, puts a domain's address on it, and another host of the LAN
// reaches a tunnel client on that address; freeing the domain takes the
// address off, stopping the node removes the interface, and a node
// without CAP_NET_ADMIN (its subnet from SUBNET_BASE) says so in its
// tunnel client's error with the command that fixes it.
func TestVirtualInterfaceLAN(t *testing.T) {
	lab := newVIFLab(t)
	serveBanner(t, lab.node, 9000, "hello-from-the-tunnel")

	data := t.TempDir()
	proc, admin := startProcessWrapped(t, in(lab.node), data)
	nsJSON(t, lab.node, admin, "POST", "/api/subnets", `{"subnets":[{"base":"198.51.100.0","cidr":24,"startIndex":10}]}`, nil)
	// Loopback subnets need no interface, and a saved subnet takes
	// effect at the restart.
	if out, err := exec.Command("ip", "-n", lab.node, "link", "show", "peerdns0").CombinedOutput(); err == nil {
		t.Fatalf("peerdns0 made before the restart: %s", out)
	}
	stopProcess(proc)
	proc, admin = startProcessWrapped(t, in(lab.node), data)
	var ifs struct {
		Interfaces []struct{ Value, Label string }
	}
	nsJSON(t, lab.node, admin, "GET", "/api/network-interfaces", "", &ifs)
	found := false
	for _, i := range ifs.Interfaces {
		found = found || i.Value == "peerdns0" && strings.Contains(i.Label, "peerdns virtual interface")
	}
	if !found {
		t.Fatalf("network-interfaces does not list peerdns0: %+v", ifs.Interfaces)
	}

	id := lanTunnel(t, lab.node, admin, "lan.p2p", 9000, 8080)
	const domainIP = "198.51.100.10"
	testutil.Eventually(t, 20*time.Second, func() error {
		if a := addrsOn(lab.node, "peerdns0"); !strings.Contains(a, domainIP+"/32") {
			return fmt.Errorf("peerdns0 addresses: %q", a)
		}
		if info := clientInfo(t, lab.node, admin, id); info.Address != domainIP+":8080" || info.State != messages.TunnelRunning {
			return fmt.Errorf("tunnel client: %+v", info)
		}
		return nil
	})
	testutil.Eventually(t, 20*time.Second, func() error {
		got, err := bannerFrom(lab.lan, domainIP+":8080")
		if err != nil || got != "hello-from-the-tunnel" {
			return fmt.Errorf("from the LAN host: %q %v", got, err)
		}
		return nil
	})

	// Freed: the address goes off the interface.
	nsJSON(t, lab.node, admin, "POST", "/api/tunnel-client-delete", fmt.Sprintf(`{"id":%q}`, id), nil)
	nsJSON(t, lab.node, admin, "POST", "/api/remove-domain", `{"domain":"lan.p2p"}`, nil)
	testutil.Eventually(t, 20*time.Second, func() error {
		if a := addrsOn(lab.node, "peerdns0"); a == "" || strings.Contains(a, domainIP) {
			return fmt.Errorf("peerdns0 after the domain was freed: %q", a)
		}
		return nil
	})

	// A clean stop removes the interface.
	stopProcess(proc)
	if out, err := exec.Command("ip", "-n", lab.node, "link", "show", "peerdns0").CombinedOutput(); err == nil {
		t.Fatalf("peerdns0 left after the node stopped: %s", out)
	}

	// Without CAP_NET_ADMIN: the client's error names the privilege and
	// the command.
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv not found (apt-get install util-linux): the unprivileged case was not run")
	}
	t.Setenv("SUBNET_BASE", "198.51.100.0/24")
	t.Setenv("INITIAL_IP_INDEX", "10")
	wrap := append(in(lab.node), "setpriv", "--bounding-set", "-net_admin", "--inh-caps", "-net_admin", "--")
	_, admin = startProcessWrapped(t, wrap, t.TempDir())
	id = lanTunnel(t, lab.node, admin, "nocap.p2p", 9000, 8081)
	testutil.Eventually(t, 20*time.Second, func() error {
		info := clientInfo(t, lab.node, admin, id)
		if info.State != messages.TunnelError || !strings.Contains(info.Error, "CAP_NET_ADMIN") || !strings.Contains(info.Error, "setcap cap_net_admin") {
			return fmt.Errorf("unprivileged tunnel client: %+v", info)
		}
		return nil
	})
	if out, err := exec.Command("ip", "-n", lab.node, "link", "show", "peerdns0").CombinedOutput(); err == nil {
		t.Fatalf("an unprivileged node made peerdns0: %s", out)
	}
}
