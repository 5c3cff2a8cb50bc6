package node

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"peerdns/actors/tunnel/tunneltest"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

// udpEchoService is tunneltest.UDPEcho's port.
func udpEchoService(t *testing.T) int { return tunneltest.UDPEcho(t).Port }

// udpRoundTrip sends msg from c until its echo arrives and returns the
// address the service saw it from.
func udpRoundTrip(t *testing.T, c *net.UDPConn, msg string) string {
	t.Helper()
	var from string
	buf := make([]byte, 4096)
	testutil.Eventually(t, 20*time.Second, func() error {
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for {
			n, err := c.Read(buf)
			if err != nil {
				return fmt.Errorf("no echo of %q: %w", msg, err)
			}
			if got, src, ok := bytes.Cut(buf[:n], []byte("|")); ok && string(got) == msg {
				from = string(src)
				return nil
			}
		}
	})
	return from
}

// A UDP echo through a tunnel between two nodes: two client sockets get
// a flow each, the listings say udp and count the flows, and both
// survive a restart of the client's node.
func TestUDPTunnelTwoNodes(t *testing.T) {
	testutil.NoLeaks(t)
	nodes := newNetwork(t, 2)
	a, b := nodes[0], nodes[1]
	baseB := "http://" + b.AdminAddr()
	sid, url := tunnelServerURL(t, a, fmt.Sprintf(`{"name":"dns","port":%d,"udp":true}`, udpEchoService(t)))
	claimOn(t, b, "udp.p2p", url)
	var cl struct{ ID string }
	mustJSON(t, "POST", baseB+"/api/tunnel-client-create",
		fmt.Sprintf(`{"domain":"udp.p2p","key":%q,"port":%d,"protocol":"udp"}`, url, freePort(t)), 200, &cl)
	addr := runningClient(t, b, cl.ID)

	dial := func() *net.UDPConn { return tunneltest.UDPSocket(t, addr) }
	c1, c2 := dial(), dial()
	from1, from2 := udpRoundTrip(t, c1, "first"), udpRoundTrip(t, c2, "second")
	if from1 == from2 {
		t.Fatalf("two sockets share the flow from %s", from1)
	}
	if again := udpRoundTrip(t, c1, "first again"); again != from1 {
		t.Fatalf("socket 1's flow moved from %s to %s", from1, again)
	}

	var ss []messages.TunnelServer
	mustJSON(t, "GET", "http://"+a.AdminAddr()+"/api/tunnel-servers", "", 200, &ss)
	var srv *messages.TunnelServer
	for i := range ss {
		if ss[i].ID == sid {
			srv = &ss[i]
		}
	}
	if srv == nil || !srv.Opts.UDP || srv.Info.ConnectionsTotal != 2 || srv.Info.BytesIn == 0 {
		t.Fatalf("udp server listed as %+v", srv)
	}
	var cs []messages.TunnelClient
	mustJSON(t, "GET", baseB+"/api/tunnel-clients", "", 200, &cs)
	if len(cs) != 1 || cs[0].Opts.Protocol != "udp" || cs[0].Info.ConnectionsOpen != 2 {
		t.Fatalf("udp client listed as %+v", cs)
	}

	// The client's node restarts: the client comes back from node.db as
	// a UDP client and carries datagrams again.
	cfgB := b.cfg
	cfgB.P2PAddr = b.endpoint.Addr().String()
	b.Stop()
	b2, err := Start(cfgB, io.Discard)
	if err != nil {
		t.Fatalf("restart B: %v", err)
	}
	t.Cleanup(b2.Stop)
	addr = runningClient(t, b2, cl.ID)
	udpRoundTrip(t, dial(), "after restart")
}
