//go:build linux

package natlab

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"peerdns/messages"
	"peerdns/transport"
)

// TestPortMapLab: two nodes behind routers running miniupnpd, X behind
// one that answers NAT-PMP only and Y behind one that answers UPnP IGD
// only, map their peer port, say so (protocol, gateway, external address)
// in /api/status and the invite diagnostics, and advertise the mapped
// address first in their invites. A public node that joins with such an
// invite dials straight in at the mapped address: the routers' filters
// drop every other unsolicited packet, as the eim router's does, and the
// joining node shares no introducer with X or Y, so nothing but the
// mapping lets it in. With a lifetime of seconds the mappings are
// renewed before they end, and when a node stops its router's forward
// is gone.
func TestPortMapLab(t *testing.T) {
	if why := PMPAvailable(); why != "" {
		t.Skip(why)
	}
	if testing.Short() {
		t.Skip("-short: the port-mapping lab starts five node processes and two miniupnpd")
	}
	dir := t.TempDir()
	bin, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	lab, err := New(fmt.Sprintf("pm-%d", os.Getpid()%100000))
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	var nodes []*Node
	defer func() {
		for _, n := range nodes {
			n.Stop()
		}
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("--- %s (%s) log tail:\n%s", n.Name, n.Place.Kind, n.LogTail(40))
			}
		}
	}()
	add := func(k Kind) *Place {
		t.Helper()
		p, err := lab.Add(k)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	pa, px, py, pp, pq := add(Public), add(PMP), add(UPnP), add(Public), add(Public)
	defer func() {
		if t.Failed() {
			for _, p := range []*Place{px, py} {
				t.Logf("--- miniupnpd in %s:\n%s", lab.Router(p), lab.RouterLog(lab.Router(p)))
			}
		}
	}()
	if err := lab.PinNeighbours(); err != nil {
		t.Fatal(err)
	}
	start := func(name string, p *Place, inv string, env ...string) *Node {
		t.Helper()
		n, err := StartEnv(bin, name, p, filepath.Join(dir, name), inv, env)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
		return n
	}
	invite := func(n *Node) string {
		t.Helper()
		var inv string
		if err := Poll(20*time.Second, 100*time.Millisecond, func() error {
			var err error
			inv, err = n.Invite()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return inv
	}
	a := start("A", pa, "")
	// A lifetime of seconds, so the renewal happens within the test.
	const life = 10 * time.Second
	lifeEnv := fmt.Sprintf("PEERDNS_TEST_PORTMAP_LIFETIME=%d", int(life/time.Second))
	x := start("X", px, invite(a), lifeEnv)
	y := start("Y", py, invite(a), lifeEnv)

	// mapping waits for n's mapping and checks what it reports.
	mapping := func(n *Node, proto string) *messages.PortMapping {
		t.Helper()
		mapped := n.Place.WAN + ":7740"
		var st struct {
			Reach messages.Reach `json:"reach"`
		}
		if err := Poll(20*time.Second, 100*time.Millisecond, func() error {
			if err := n.GetJSON("/api/status", &st); err != nil {
				return err
			}
			if pm := st.Reach.PortMapping; pm == nil || pm.State != messages.PortMapMapped {
				return fmt.Errorf("reach.portMapping %+v", pm)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s never mapped its port: %v", n.Name, err)
		}
		pm := st.Reach.PortMapping
		// The mapping was made a lifetime before it expires (same host
		// clock as the process start).
		t.Logf("%s: mapped by %s %v after its process started", n.Name, proto,
			time.UnixMilli(pm.ExpiresAt).Add(-life).Sub(n.Started).Round(time.Millisecond))
		gw := netip.MustParseAddr(n.Place.IP).Prev().String() // the router's LAN address (lab.go)
		if pm.Protocol != proto || pm.External != mapped || pm.ExternalTCP != mapped ||
			pm.Gateway != gw || !pm.Advertised || pm.ExpiresAt <= time.Now().UnixMilli() {
			t.Fatalf("%s: reach.portMapping %+v, want %s via %s to %s (UDP and TCP), advertised", n.Name, pm, proto, gw, mapped)
		}
		if !slices.Contains(st.Reach.Advertised, mapped) {
			t.Fatalf("%s: reach.advertised %v lacks the mapping %s", n.Name, st.Reach.Advertised, mapped)
		}
		d, err := n.Diag()
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := d.Summary.Reach["portMapping"].(map[string]any); got == nil || got["external"] != mapped || got["protocol"] != proto {
			t.Fatalf("%s: diagnostics summary.reach.portMapping %v", n.Name, d.Summary.Reach["portMapping"])
		}
		// miniupnpd wrote the forward into the router's nftables.
		if rules, err := NFT(lab.Router(n.Place), "chain inet filter prerouting_miniupnpd"); err != nil || !strings.Contains(rules, "7740") {
			t.Fatalf("%s's router forwards: %v\n%s", n.Name, err, rules)
		}
		return pm
	}
	pmX, pmY := mapping(x, messages.PortMapNATPMP), mapping(y, messages.PortMapUPnP)

	// joinIn: a new public node joins with n's invite and reaches n at
	// its mapped address.
	joinIn := func(name string, p *Place, n *Node) *Node {
		t.Helper()
		mapped := n.Place.WAN + ":7740"
		inv := invite(n)
		iv, err := transport.ParseInvite(inv)
		if err != nil {
			t.Fatal(err)
		}
		if len(iv.Addrs) == 0 || iv.Addrs[0] != mapped {
			t.Fatalf("%s's invite addresses %v, want the mapping %s first", n.Name, iv.Addrs, mapped)
		}
		j := start(name, p, inv)
		var pv *PeerView
		// Within 8 s: less than one dial's handshake timeout (10 s). An
		// invite address that drops its packets (the LAN address, the
		// port a symmetric NAT gave another flow) holds its dial that
		// long; the joiner dials the others beside it a second apart
		// (actors/peer, dialGate), and one that dialed them one at a
		// time, beginning with such an address, would not make it.
		if err := Poll(8*time.Second, 50*time.Millisecond, func() error {
			var err error
			pv, err = j.PeerTo(n.ID)
			return err
		}); err != nil {
			t.Fatalf("%s never reached %s through the mapping: %v", name, n.Name, err)
		}
		if pv.Path != "direct" || pv.RemoteAddr != mapped {
			t.Fatalf("%s's session with %s: path %q remote %q, want direct to %s", name, n.Name, pv.Path, pv.RemoteAddr, mapped)
		}
		t.Logf("%s joined %s directly at %s, %v after its process started", name, n.Name, pv.RemoteAddr, time.Since(j.Started).Round(time.Millisecond))
		return j
	}
	p := joinIn("P", pp, x)
	q := joinIn("Q", pq, y)

	// Both renew before the lifetime ends: the expiry moves on and the
	// routers still forward the port past the first lifetime.
	for _, c := range []struct {
		n     *Node
		first int64
	}{{x, pmX.ExpiresAt}, {y, pmY.ExpiresAt}} {
		if err := Poll(life+5*time.Second, 200*time.Millisecond, func() error {
			var st struct {
				Reach messages.Reach `json:"reach"`
			}
			if err := c.n.GetJSON("/api/status", &st); err != nil {
				return err
			}
			if pm := st.Reach.PortMapping; pm == nil || pm.State != messages.PortMapMapped || pm.ExpiresAt <= c.first {
				return fmt.Errorf("%s not renewed: %+v (first expiry %d)", c.n.Name, pm, c.first)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	last := max(pmX.ExpiresAt, pmY.ExpiresAt)
	for time.Now().UnixMilli() < last+1000 {
		time.Sleep(100 * time.Millisecond) // past the first lifetimes (a fixed instant, not a wait for an event)
	}
	for _, c := range []struct{ n, j *Node }{{x, p}, {y, q}} {
		if rules, err := NFT(lab.Router(c.n.Place), "chain inet filter prerouting_miniupnpd"); err != nil || !strings.Contains(rules, "7740") {
			t.Fatalf("%s's router forwards after the first lifetime: %v\n%s", c.n.Name, err, rules)
		}
		if _, err := c.j.PeerTo(c.n.ID); err != nil {
			t.Fatalf("after the renewal: %v", err)
		}
	}

	// Stopping a node deletes its mapping on the router.
	for _, n := range []*Node{x, y} {
		n.Stop()
		if err := Poll(10*time.Second, 100*time.Millisecond, func() error {
			rules, err := NFT(lab.Router(n.Place), "chain inet filter prerouting_miniupnpd")
			if err != nil {
				return err
			}
			if strings.Contains(rules, "7740") {
				return fmt.Errorf("the router still forwards port 7740:\n%s", rules)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s's mapping outlived it: %v", n.Name, err)
		}
	}
}
