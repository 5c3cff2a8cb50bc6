package peer

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// An invite whose first addresses drop every packet (a LAN address seen
// from outside, a port a NAT gave another flow) still joins within a
// second or so per such address: the joiner dials the invite's addresses
// side by side while a dial waits, not one after another, each dead one
// holding its dial for the whole handshake timeout.
func TestJoinPastDeadInviteAddresses(t *testing.T) {
	var dead []string
	for range 3 {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		go func() { // read and drop: the handshake never gets an answer
			buf := make([]byte, 2048)
			for {
				if _, _, err := c.ReadFrom(buf); errors.Is(err, net.ErrClosed) {
					return
				}
			}
		}()
		dead = append(dead, c.LocalAddr().String())
	}
	// A's own address among the dead ones, none of them last: the
	// joiner starts a dialer per address in the invite's order, and the
	// last started tends to reach the dial gate first.
	a := newTestNode(t, "A", nodeOpts{})
	a.stop()
	a.opts.advertise = []string{dead[0], a.addr, dead[1], dead[2]}
	a.start()
	inv := a.invite(0)
	start := time.Now()
	// B's dials wait as long as a node's do (the transport's default
	// handshake timeout, 10 s), and B must join in less: a joiner that
	// dialed the addresses one at a time took that long per dead one it
	// began with.
	b := newTestNode(t, "B", nodeOpts{join: inv, handshake: 10 * time.Second})
	testutil.Eventually(t, 8*time.Second, func() error {
		if !a.isWriter(b.id.ID()) || !b.isWriter(b.id.ID()) {
			return fmt.Errorf("B not a writer yet on both sides")
		}
		return nil
	})
	t.Logf("B joined past %d dead invite addresses in %v", len(dead), time.Since(start).Round(time.Millisecond))
}
