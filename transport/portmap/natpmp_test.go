package portmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// pmpGateway is a NAT-PMP server on a loopback address of its own (the
// protocol's port, 5351, is fixed, so each gateway takes another address
// of 127.0.0.0/8). answer decides the reply to a request (nil: none).
type pmpGateway struct {
	addr   netip.Addr
	conn   *net.UDPConn
	answer func(req []byte) []byte
}

// startPMPGateway listens on a free loopback address's NAT-PMP port.
func startPMPGateway(t *testing.T, answer func(req []byte) []byte) *pmpGateway {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("needs all of 127.0.0.0/8 on loopback (Linux)")
	}
	var err error
	for range 20 {
		a := netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(250)), byte(rand.IntN(256)), byte(2 + rand.IntN(250))})
		var c *net.UDPConn
		if c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 5351))); err == nil {
			g := &pmpGateway{addr: a, conn: c, answer: answer}
			go g.serve()
			t.Cleanup(func() { c.Close() })
			return g
		}
	}
	t.Fatalf("no loopback address for a NAT-PMP gateway: %v", err)
	return nil
}

func (g *pmpGateway) serve() {
	buf := make([]byte, 64)
	for {
		n, from, err := g.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		if out := g.answer(append([]byte(nil), buf[:n]...)); out != nil {
			g.conn.WriteToUDPAddrPort(out, from)
		}
	}
}

// pmpAnswer is a well-formed answer to req: the external address ext, and
// a mapping of the asked internal port to the asked external one (the
// internal one when none is asked) for life seconds.
func pmpAnswer(req []byte, ext [4]byte, life uint32) []byte {
	if len(req) < 2 {
		return nil
	}
	switch req[1] {
	case 0:
		out := []byte{0, 128, 0, 0, 0, 0, 0, 1}
		return append(out, ext[:]...)
	case 1, 2:
		if len(req) < 12 {
			return nil
		}
		out := make([]byte, 16)
		out[1] = 128 + req[1]
		binary.BigEndian.PutUint32(out[4:], 1)
		copy(out[8:10], req[4:6])
		copy(out[10:12], req[6:8])
		if req[6] == 0 && req[7] == 0 {
			copy(out[10:12], req[4:6])
		}
		l := min(life, binary.BigEndian.Uint32(req[8:12]))
		binary.BigEndian.PutUint32(out[12:], l)
		return out
	}
	return nil
}

// A node that moves to another network, whose router maps nothing, no
// longer holds (nor advertises) the mapping of the router it left: peers
// would dial an address that leads nowhere until that mapping's lifetime
// ran out.
func TestMovedToGatewayWithoutMapping(t *testing.T) {
	ext := [4]byte{203, 0, 113, 9}
	first := startPMPGateway(t, func(req []byte) []byte { return pmpAnswer(req, ext, 4) })
	// The second network's router: an address where nothing listens on
	// the NAT-PMP port (refused at once; on loopback, no UPnP search).
	second := netip.AddrFrom4([4]byte{127, first.addr.As4()[1], first.addr.As4()[2], first.addr.As4()[3] + 1})
	gw := make(chan netip.Addr, 1)
	gw <- first.addr
	cur := first.addr
	m := Start(Config{Port: 7740, Timeout: 2 * time.Second, Retry: time.Hour,
		Gateway: func() (netip.Addr, error) {
			select {
			case cur = <-gw:
			default:
			}
			return cur, nil
		}})
	defer m.Close()
	testutil.Eventually(t, 5*time.Second, func() error {
		if s := m.Status(); s.State != messages.PortMapMapped || Advertise(s) != "203.0.113.9:7740" {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	gw <- second
	// The renewal (at three quarters of the 4 s granted) finds the
	// second router, which refuses.
	testutil.Eventually(t, 8*time.Second, func() error {
		if s := m.Status(); s.Detail == "" {
			return errors.New("no try on the second network yet")
		}
		return nil
	})
	if s := m.Status(); s.State == messages.PortMapMapped || Advertise(s) != "" {
		t.Fatalf("after moving to a network whose router maps nothing: %+v (advertised %q)", s, Advertise(s))
	}
}

// Stopping waits for the request in flight, not for the ones after it: a
// router that answers the external address question and then goes
// silent does not hold the node's stop for another Timeout.
func TestCloseDoesNotStartAnotherRequest(t *testing.T) {
	asked := make(chan struct{})
	release := make(chan struct{})
	g := startPMPGateway(t, func(req []byte) []byte {
		if len(req) < 2 || req[1] != 0 {
			return nil // silent on mapping requests
		}
		select {
		case asked <- struct{}{}:
			<-release
		default: // a retransmission while the test looks
		}
		return pmpAnswer(req, [4]byte{203, 0, 113, 9}, 7200)
	})
	const timeout = 10 * time.Second
	m := Start(Config{Port: 7740, Timeout: timeout, Retry: time.Hour,
		Gateway: func() (netip.Addr, error) { return g.addr, nil }})
	<-asked
	m.cancel() // what Close does first, while the request is in flight
	close(release)
	start := time.Now()
	m.Close()
	if d := time.Since(start); d > timeout/2 {
		t.Fatalf("Close took %v: it waited for a request started after the stop", d)
	}
}

// A router that grants more than was asked (here the longest lifetime
// the protocol can say, 136 years) is renewed as if it had granted what
// was asked: RFC 6886 lets a router shorten a lifetime, not lengthen it,
// and a mapping such a router loses (a reboot) would otherwise be asked
// for again only when the node restarts.
func TestLongerLifetimeThanAskedIsRenewed(t *testing.T) {
	maps := make(chan struct{}, 100)
	g := startPMPGateway(t, func(req []byte) []byte {
		out := pmpAnswer(req, [4]byte{203, 0, 113, 9}, 4)
		if len(req) >= 2 && req[1] == 1 {
			binary.BigEndian.PutUint32(out[12:], 0xffffffff)
			maps <- struct{}{}
		}
		return out
	})
	m := Start(Config{Port: 7740, Lifetime: 4 * time.Second, Retry: time.Hour,
		Gateway: func() (netip.Addr, error) { return g.addr, nil }})
	defer m.Close()
	testutil.Eventually(t, 5*time.Second, func() error {
		if s := m.Status(); s.State != messages.PortMapMapped {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	if s := m.Status(); time.UnixMilli(s.ExpiresAt).After(time.Now().Add(5 * time.Second)) {
		t.Fatalf("expires at %v, past the 4 s asked", time.UnixMilli(s.ExpiresAt))
	}
	testutil.Eventually(t, 8*time.Second, func() error {
		if n := len(maps); n < 2 {
			return fmt.Errorf("%d mapping requests, want a renewal", n)
		}
		return nil
	})
}

// A renewal whose TCP request goes unanswered leaves the router's TCP
// mapping alive until its lifetime ends; Close deletes it still, as it
// deletes the UDP one, instead of leaving the router forwarding the
// port of a node that stopped.
func TestCloseDeletesTCPMappingAfterFailedTCPRenewal(t *testing.T) {
	var tcpMaps atomic.Int32
	deleted := make(chan byte, 10)
	g := startPMPGateway(t, func(req []byte) []byte {
		if len(req) == 12 && binary.BigEndian.Uint32(req[8:]) == 0 {
			deleted <- req[1]
		} else if len(req) == 12 && req[1] == 2 && tcpMaps.Add(1) > 1 {
			return nil // silent on the TCP renewal
		}
		return pmpAnswer(req, [4]byte{203, 0, 113, 9}, 4)
	})
	m := Start(Config{Port: 7740, TCP: true, Timeout: 300 * time.Millisecond, Retry: time.Hour,
		Gateway: func() (netip.Addr, error) { return g.addr, nil }})
	testutil.Eventually(t, 5*time.Second, func() error {
		if s := m.Status(); s.ExternalTCP != "203.0.113.9:7740" {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	testutil.Eventually(t, 8*time.Second, func() error {
		if s := m.Status(); s.State != messages.PortMapMapped || s.ExternalTCP != "" {
			return fmt.Errorf("status %+v, want a renewal without TCP", s)
		}
		return nil
	})
	m.Close()
	// Close sent both deletions; it waits at most Timeout (300 ms) for
	// each answer, so the gateway may take them in only after it returns.
	got := map[byte]bool{}
	timeout := time.After(10 * time.Second)
	for !got[1] || !got[2] {
		select {
		case op := <-deleted:
			got[op] = true
		case <-timeout:
			t.Fatalf("deleted opcodes %v, want udp (1) and tcp (2)", got)
		}
	}
}
