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

// TestPortMapLab: a node behind a router running miniupnpd maps its peer
// port with NAT-PMP, says so in /api/status and the invite diagnostics,
// and advertises the mapped address first in its invites; a public node
// that joins with such an invite dials straight in at the mapped address
// (the router's filter drops every other unsolicited packet, as the eim
// router's does, so nothing but the mapping lets it in: no punching, no
// introducer in common); when the node stops, the router's forward is
// gone.
func TestPortMapLab(t *testing.T) {
	if why := PMPAvailable(); why != "" {
		t.Skip(why)
	}
	if testing.Short() {
		t.Skip("-short: the port-mapping lab starts three node processes and miniupnpd")
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
	pa, err := lab.Add(Public)
	if err != nil {
		t.Fatal(err)
	}
	px, err := lab.Add(PMP)
	if err != nil {
		t.Fatal(err)
	}
	router := lab.Router(px)
	defer func() {
		if t.Failed() {
			t.Logf("--- miniupnpd in %s:\n%s", router, lab.RouterLog(router))
		}
	}()
	pp, err := lab.Add(Public)
	if err != nil {
		t.Fatal(err)
	}
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
	x := start("X", px, invite(a), fmt.Sprintf("PEERDNS_TEST_PORTMAP_LIFETIME=%d", int(life/time.Second)))

	mapped := px.WAN + ":7740"
	var st struct {
		Reach messages.Reach `json:"reach"`
	}
	if err := Poll(20*time.Second, 100*time.Millisecond, func() error {
		if err := x.GetJSON("/api/status", &st); err != nil {
			return err
		}
		if pm := st.Reach.PortMapping; pm == nil || pm.State != messages.PortMapMapped {
			return fmt.Errorf("reach.portMapping %+v", pm)
		}
		return nil
	}); err != nil {
		t.Fatalf("X never mapped its port: %v", err)
	}
	pm := st.Reach.PortMapping
	gw := netip.MustParseAddr(px.IP).Prev().String() // the router's LAN address (lab.go)
	if pm.Protocol != messages.PortMapNATPMP || pm.External != mapped || pm.ExternalTCP != mapped ||
		pm.Gateway != gw || !pm.Advertised || pm.ExpiresAt <= time.Now().UnixMilli() {
		t.Fatalf("reach.portMapping %+v, want nat-pmp via %s to %s (UDP and TCP), advertised", pm, gw, mapped)
	}
	if !slices.Contains(st.Reach.Advertised, mapped) {
		t.Fatalf("reach.advertised %v lacks the mapping %s", st.Reach.Advertised, mapped)
	}
	d, err := x.Diag()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Summary.Reach["portMapping"].(map[string]any); got == nil || got["external"] != mapped || got["protocol"] != "nat-pmp" {
		t.Fatalf("diagnostics summary.reach.portMapping %v", d.Summary.Reach["portMapping"])
	}
	// miniupnpd wrote the forward into the router's nftables.
	if rules, err := NFT(router, "chain inet filter prerouting_miniupnpd"); err != nil || !strings.Contains(rules, "7740") {
		t.Fatalf("router forwards: %v\n%s", err, rules)
	}

	invX := invite(x)
	iv, err := transport.ParseInvite(invX)
	if err != nil {
		t.Fatal(err)
	}
	if len(iv.Addrs) == 0 || iv.Addrs[0] != mapped {
		t.Fatalf("X's invite addresses %v, want the mapping %s first", iv.Addrs, mapped)
	}
	p := start("P", pp, invX)
	var pv *PeerView
	if err := Poll(20*time.Second, 50*time.Millisecond, func() error {
		var err error
		pv, err = p.PeerTo(x.ID)
		return err
	}); err != nil {
		t.Fatalf("P never reached X through the mapping: %v", err)
	}
	if pv.Path != "direct" || pv.RemoteAddr != mapped {
		t.Fatalf("P's session with X: path %q remote %q, want direct to %s", pv.Path, pv.RemoteAddr, mapped)
	}
	t.Logf("P joined X directly at %s (rtt %.2f ms)", pv.RemoteAddr, pv.RTTMillis)

	// X renews before the lifetime ends: the expiry moves on and the
	// router still forwards the port past the first lifetime.
	first := pm.ExpiresAt
	if err := Poll(life+5*time.Second, 200*time.Millisecond, func() error {
		if err := x.GetJSON("/api/status", &st); err != nil {
			return err
		}
		if pm := st.Reach.PortMapping; pm == nil || pm.State != messages.PortMapMapped || pm.ExpiresAt <= first {
			return fmt.Errorf("not renewed: %+v (first expiry %d)", pm, first)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for time.Now().UnixMilli() < first+1000 {
		time.Sleep(100 * time.Millisecond) // past the first lifetime (a fixed instant, not a wait for an event)
	}
	if rules, err := NFT(router, "chain inet filter prerouting_miniupnpd"); err != nil || !strings.Contains(rules, "7740") {
		t.Fatalf("router forwards after the first lifetime: %v\n%s", err, rules)
	}
	if _, err := p.PeerTo(x.ID); err != nil {
		t.Fatalf("after the renewal: %v", err)
	}

	// Stopping X deletes the mapping on the router.
	x.Stop()
	if err := Poll(10*time.Second, 100*time.Millisecond, func() error {
		rules, err := NFT(router, "chain inet filter prerouting_miniupnpd")
		if err != nil {
			return err
		}
		if strings.Contains(rules, "7740") {
			return fmt.Errorf("the router still forwards port 7740:\n%s", rules)
		}
		return nil
	}); err != nil {
		t.Fatalf("X's mapping outlived it: %v", err)
	}
}
