package main

import (
	"fmt"
	"os"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// A relay that tampers: R1 flips a byte in everything it relays
// (PEERDNS_TEST_RELAY_TAMPER, a fault-test switch read by the node). B
// and C, behind random-port NATs, can only meet through a relay; every
// attempt through R1 fails closed (TLS between B and C refuses the
// changed bytes) and nothing connects them while R1 is the only relay.
// When an honest relay R2 joins, the pair moves on to it and ends
// connected, with a tunnel carrying data.
func TestReachTamperingRelayFailsClosed(t *testing.T) {
	l := newReachLab(t)
	pub := l.publicSegment()
	pub2, r1, r2, b, c := l.add("pub2"), l.add("r1"), l.add("r2"), l.add("b"), l.add("c")
	l.onPublic(pub, pub2, "p3", "203.0.113.20") // R2's host on the public segment
	l.onPublic(pub, r1, "p1", "203.0.113.11")
	l.onPublic(pub, r2, "p2", "203.0.113.12")
	l.link(r1, "lan", "192.0.2.1/24", b, "v0", "192.0.2.2/24")
	l.link(r2, "lan", "198.51.100.1/24", c, "v0", "198.51.100.2/24")
	l.must("-n", b, "route", "add", "default", "via", "192.0.2.1")
	l.must("-n", c, "route", "add", "default", "via", "198.51.100.1")
	l.symmetricRouter(r1, "wan")
	l.symmetricRouter(r2, "wan")

	bad := l.start(pub, "203.0.113.10:7740", []string{"PEERDNS_TEST_RELAY_TAMPER=1"})
	nb := l.start(b, "192.0.2.2:7740", nil, "--join", bad.invite(t))
	nc := l.start(c, "198.51.100.2:7740", nil, "--join", bad.invite(t))
	idBad, idb, idc := bad.id(t), nb.id(t), nc.id(t)
	nb.connectedBy(t, 60*time.Second, idBad, "quic", "")
	nc.connectedBy(t, 60*time.Second, idBad, "quic", "")

	// Attempts go through the tampering relay and fail closed.
	testutil.Eventually(t, 60*time.Second, func() error {
		if d := bad.diag(t); d.Summary.Paths.RelayServed < 2 {
			return fmt.Errorf("tampering relay served %d relayed connections, want 2 attempts", d.Summary.Paths.RelayServed)
		}
		return nil
	})
	for _, p := range nb.diag(t).Peers {
		if p.ID == idc && p.State == "connected" {
			t.Fatalf("B connected to C (%s via %.8s) through a relay that flips bytes", p.Transport, p.Relay)
		}
	}

	// An honest relay joins: the pair reaches each other through it.
	good := l.start(pub2, "203.0.113.20:7740", nil, "--join", bad.invite(t))
	idGood := good.id(t)
	nb.connectedBy(t, 60*time.Second, idGood, "quic", "")
	nc.connectedBy(t, 60*time.Second, idGood, "quic", "")
	nb.connectedBy(t, 60*time.Second, idc, "relayed", idGood)
	nc.connectedBy(t, 60*time.Second, idb, "relayed", idGood)
	addr := tunnelTo(t, nc, nb, "honest.p2p", 17005)
	carries(t, nb, addr, idc)
	if d := good.diag(t); d.Summary.Paths.RelayServed == 0 || d.Summary.Paths.RelayBytes == 0 {
		t.Fatalf("honest relay's counters: %+v", d.Summary.Paths)
	}
}

// reachPrefix starts the reach lab's namespace names: PEERDNS_REACH_PREFIX
// (so two people testing on one machine keep apart) or "prr".
func reachPrefix() string {
	if p := os.Getenv("PEERDNS_REACH_PREFIX"); p != "" {
		return p
	}
	return "prr"
}
