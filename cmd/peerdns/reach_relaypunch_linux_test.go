package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// eimRouter is symmetricRouter with a masquerade that keeps the source
// port when it can: one mapping for every destination
// (endpoint-independent), so two such LANs can punch through to each
// other. UDP to the router itself is dropped: a punch packet that came
// before the LAN's own first packet would otherwise leave a conntrack
// entry holding the port the masquerade wants to keep. The table
// "block" drops the router's forwarded traffic to and from the public
// address other, both ways, until it is deleted.
func (l *reachLab) eimRouter(ns, wan, other string) {
	l.sysctl(ns, "net.ipv4.ip_forward=1")
	l.nft(ns, fmt.Sprintf(`table ip nat {
	chain post { type nat hook postrouting priority 100; oifname %q masquerade; }
}
table ip filter {
	chain forward_lan { type filter hook forward priority 0; policy drop;
		ct state established,related accept
		iifname != %q accept
	}
	chain input_wan { type filter hook input priority 0; iifname %q meta l4proto udp drop; }
}
table ip block {
	chain drop_other { type filter hook forward priority -10; ip daddr %s drop; ip saddr %s drop; }
}
`, wan, wan, wan, other, other))
}

// A pair that came up relayed because it could not punch at first
// punches once it can: introductions go on for a peer connected only
// through a relay, and the punched path replaces the relayed session.
// The two LANs sit behind endpoint-independent NATs whose traffic to
// each other is dropped until both nodes are relayed.
func TestReachRelayedPairPunchesLater(t *testing.T) {
	l := newReachLab(t)
	publicOf := map[string]string{} // router → the other router's public address
	n := 0
	pub, hosts, _ := l.routedLab(func(ns, wan string) {
		n++
		other := fmt.Sprintf("203.0.113.%d", 11+(n%2)) // r1 blocks r2's (.12), r2 blocks r1's (.11)
		publicOf[ns] = other
		l.eimRouter(ns, wan, other)
	}, "192.0.2", "198.51.100")
	relay := l.start(pub, "203.0.113.10:7740", nil)
	nb := l.start(hosts[0][0], "192.0.2.2:7740", nil, "--join", relay.invite(t))
	nc := l.start(hosts[1][0], "198.51.100.2:7740", nil, "--join", relay.invite(t))
	idr, idb, idc := relay.id(t), nb.id(t), nc.id(t)
	nb.connectedBy(t, 60*time.Second, idc, "relayed", idr)
	nc.connectedBy(t, 30*time.Second, idb, "relayed", idr)
	// Introductions go on for the relayed pair (its punches still
	// blocked): the relay introduces the two again, and again.
	before := relay.introductions(t)
	testutil.Eventually(t, 90*time.Second, func() error {
		if n := relay.introductions(t); n < before+2 {
			return fmt.Errorf("the relay made %d introductions since the pair was relayed, want 2", n-before)
		}
		return nil
	})
	for ns := range publicOf {
		l.nft(ns, "delete table ip block\n")
	}
	// Introductions for a relayed peer back off to one every 30 s (in
	// their first five minutes, which this test stays within); a
	// punch then takes about a second. Neither LAN's address is
	// reachable from the other, and no peer but the relay sees where
	// either comes from: a direct QUIC path now is a punched one.
	nb.connectedBy(t, 90*time.Second, idc, "quic", "")
	nc.connectedBy(t, 30*time.Second, idb, "quic", "")
}

// introductions is how many introductions r has made.
func (r *reachNode) introductions(t *testing.T) int64 {
	t.Helper()
	var d struct {
		Summary struct {
			Reach struct {
				Introductions int64 `json:"introductions"`
			} `json:"reach"`
		} `json:"summary"`
	}
	code, body := r.call(t, "GET", "/api/diagnostics/invites", "")
	if code != 200 || json.Unmarshal([]byte(body), &d) != nil {
		t.Fatalf("diagnostics: %d %.200s", code, body)
	}
	return d.Summary.Reach.Introductions
}
