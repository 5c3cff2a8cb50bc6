package peer

import (
	"slices"
	"sync/atomic"
	"testing"

	"peerdns/messages"
)

// TestPortMapAdvertised: the router's mapping is advertised after the
// --advertise-addr ones (invites and the reach view) and shown in the
// reach view; a mapping to a private address, or one the router
// dropped, is shown but not advertised.
func TestPortMapAdvertised(t *testing.T) {
	const manual, mapped = "198.51.100.9:7740", "203.0.113.5:7740"
	var cur atomic.Pointer[messages.PortMapping]
	cur.Store(&messages.PortMapping{State: messages.PortMapMapped, Protocol: messages.PortMapNATPMP,
		Gateway: "192.168.1.1", External: mapped, Advertised: true})
	a := newTestNode(t, "A", nodeOpts{advertise: []string{manual}, portMap: cur.Load})
	if addrs := inviteAddrs(t, a); len(addrs) < 3 || addrs[0] != manual || addrs[1] != mapped {
		t.Fatalf("invite addresses %v, want %s then %s", addrs, manual, mapped)
	}
	re := reachOf(t, a)
	if re.PortMapping == nil || re.PortMapping.External != mapped || re.PortMapping.Protocol != messages.PortMapNATPMP {
		t.Fatalf("reach.portMapping %+v", re.PortMapping)
	}
	if !slices.Contains(re.Advertised, mapped) {
		t.Fatalf("reach.advertised %v lacks %s", re.Advertised, mapped)
	}
	for _, s := range []*messages.PortMapping{
		{State: messages.PortMapMapped, External: "10.0.0.7:7740", Advertised: false},
		{State: messages.PortMapUnavailable, Detail: "no default gateway"},
	} {
		cur.Store(s)
		re := reachOf(t, a)
		if slices.Contains(re.Advertised, s.External) || slices.Contains(re.Advertised, mapped) {
			t.Fatalf("mapping %+v: advertised %v", s, re.Advertised)
		}
		if re.PortMapping == nil || re.PortMapping.State != s.State {
			t.Fatalf("mapping %+v shown as %+v", s, re.PortMapping)
		}
	}
}
