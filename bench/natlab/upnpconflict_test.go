//go:build linux

package natlab

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/huin/goupnp/dcps/internetgateway2"

	"peerdns/messages"
	"peerdns/transport/portmap"
)

// TestUPnPPortTakenMapsAnother: behind a UPnP router (miniupnpd) whose
// external peer port (7740) is mapped already, to another node behind
// the same router on the same port (another LAN address), a node still
// gets a mapping, on another external port, for UDP and TCP, and the
// router forwards it. The router answers the peer port with
// ConflictInMappingEntry (718); a mapper that asks for that port alone
// never maps anything there, where NAT-PMP lets the router pick. Both
// kinds of router: IGDv2 (miniupnpd's own), which offers
// AddAnyPortMapping, and IGDv1, which does not.
//
// The mapper runs in the test binary itself, executed again inside the
// node's namespace (every thread of it there), as portmap's sockets are
// opened on goroutines of their own.
func TestUPnPPortTakenMapsAnother(t *testing.T) {
	if os.Getenv("NATLAB_UPNP_PLACE") != "" {
		upnpConflictInPlace(t)
		return
	}
	if why := PMPAvailable(); why != "" {
		t.Skip(why)
	}
	if testing.Short() {
		t.Skip("-short: starts miniupnpd in a lab")
	}
	for i, v1 := range []bool{false, true} {
		t.Run(fmt.Sprintf("IGDv1=%v", v1), func(t *testing.T) { upnpConflictLab(t, fmt.Sprintf("pu%d-%d", i, os.Getpid()%100000), v1) })
	}
}

// upnpConflictLab makes the lab and runs the test binary again in it.
func upnpConflictLab(t *testing.T, prefix string, v1 bool) {
	lab, err := New(prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	lab.UPnPv1 = v1
	p, err := lab.Add(UPnP)
	if err != nil {
		t.Fatal(err)
	}
	if err := lab.PinNeighbours(); err != nil {
		t.Fatal(err)
	}
	// The other node's address, beside the node's own (.2) on its LAN.
	other := netip.MustParseAddr(p.IP).Next().String()
	if err := run("ip", "-n", p.NS, "addr", "add", other+"/28", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	r := lab.Router(p)
	cmd := exec.Command("ip", "netns", "exec", p.NS, os.Args[0], "-test.run=^TestUPnPPortTakenMapsAnother$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "NATLAB_UPNP_PLACE="+strings.Join([]string{p.IP, p.WAN, r, other, fmt.Sprint(v1)}, ","))
	out, err := cmd.CombinedOutput()
	t.Logf("in namespace %s:\n%s", p.NS, out)
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("the test failed in its namespace: %v\n--- miniupnpd:\n%s", err, lab.RouterLog(r))
	}
}

// upnpConflictInPlace is the part that runs in the node's namespace.
func upnpConflictInPlace(t *testing.T) {
	f := strings.Split(os.Getenv("NATLAB_UPNP_PLACE"), ",")
	ip, wan, router, other, v1 := f[0], f[1], f[2], f[3], f[4] == "true"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// The other node's mapping: external 7740 to its own 7740, asked
	// from its own address (miniupnpd's secure_mode maps a client only
	// to the address it asks from).
	from := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(other)}}
	hc := http.Client{Transport: &http.Transport{DialContext: from.DialContext}}
	if v1 {
		cs, _, err := internetgateway2.NewWANIPConnection1ClientsCtx(ctx)
		if err != nil || len(cs) == 0 {
			t.Fatalf("no WANIPConnection:1 service found: %v", err)
		}
		cs[0].SOAPClient.HTTPClient = hc
		err = cs[0].AddPortMappingCtx(ctx, "", 7740, "UDP", 7740, other, true, "the other node", 3600)
		if err != nil {
			t.Fatalf("the other node's mapping: %v", err)
		}
	} else {
		cs, _, err := internetgateway2.NewWANIPConnection2ClientsCtx(ctx)
		if err != nil || len(cs) == 0 {
			t.Fatalf("no WANIPConnection:2 service found: %v", err)
		}
		cs[0].SOAPClient.HTTPClient = hc
		err = cs[0].AddPortMappingCtx(ctx, "", 7740, "UDP", 7740, other, true, "the other node", 3600)
		if err != nil {
			t.Fatalf("the other node's mapping: %v", err)
		}
	}

	m := portmap.Start(portmap.Config{Port: 7740, TCP: true, Tries: 1, Retry: time.Hour})
	defer m.Close()
	var s *messages.PortMapping
	if err := Poll(15*time.Second, 50*time.Millisecond, func() error {
		s = m.Status()
		switch s.State {
		case messages.PortMapMapped:
			return nil
		case messages.PortMapUnavailable:
			return fmt.Errorf("gave up: %s", s.Detail)
		}
		return fmt.Errorf("state %q", s.State)
	}); err != nil || s.State != messages.PortMapMapped {
		t.Fatalf("no mapping with the peer port taken: %v (%+v)", err, s)
	}
	ext, err := netip.ParseAddrPort(s.External)
	if err != nil || ext.Addr().String() != wan || ext.Port() == 7740 || s.ExternalTCP != s.External || s.Protocol != messages.PortMapUPnP {
		t.Fatalf("mapping %+v, want UPnP on %s, a port other than 7740, for UDP and TCP", s, wan)
	}
	rules, err := NFT(router, "chain inet filter prerouting_miniupnpd")
	if err != nil {
		t.Fatal(err)
	}
	for _, proto := range []string{"0x11", "0x6"} { // UDP, TCP (the IP header's protocol byte)
		want := fmt.Sprintf("%s th dport %d dnat ip to %s:7740", proto, ext.Port(), ip)
		if !strings.Contains(rules, want) {
			t.Fatalf("the router does not forward %s (no %q):\n%s", s.External, want, rules)
		}
	}
	t.Logf("mapped %s (UDP and TCP) beside the other node's 7740", s.External)
}
