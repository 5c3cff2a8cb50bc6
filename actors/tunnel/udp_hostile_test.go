package tunnel

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// Datagrams that belong to no flow of theirs reach nothing: a peer's
// datagrams for flows it never registered (random ids, ids next to its
// own flow's, datagrams shorter than a flow id) are dropped, and a
// stranger's datagrams to the address a flow's socket uses toward the
// service, or to the client's socket from another source, never reach
// the flow's client socket.
func TestUDPForeignDatagramsReachNoFlow(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, true)
	a, b, h := tn.node(nil), tn.node(nil), tn.node(nil)
	connect(t, a, b)
	connect(t, a, h)
	sid, _, addr := udpTunnel(t, a, b, "fudp.p2p")
	c1 := udpSocket(t, addr)
	flowAddr := udpAsk(t, c1, "legit")

	// The hostile peer registers a flow of its own, then sends datagrams
	// for ids it never registered.
	url := a.server(sid).Info.URL
	conn, _ := h.mesh.Conn(a.id.ID())
	own := uint64(0x1234)
	s, err := openTunnel(t.Context(), conn, url[5:], nil, own, time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	streamClose(s)
	pkt := make([]byte, flowIDLen+len("evil"))
	copy(pkt[flowIDLen:], "evil")
	for i := 0; i < 2000; i++ {
		id := rand.Uint64()
		if i < 100 {
			id = own + uint64(i) + 1
		}
		binary.BigEndian.PutUint64(pkt, id)
		_ = conn.SendDatagram(pkt)
		_ = conn.SendDatagram(pkt[:i%flowIDLen])
	}
	// A stranger writes to the flow's socket on the server's side and to
	// the client's socket.
	stranger, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	fa, err := net.ResolveUDPAddr("udp", flowAddr)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		_, _ = stranger.WriteToUDP([]byte("evil"), fa)
		_, _ = stranger.WriteToUDP([]byte("evil"), ca)
	}
	// The legitimate flow goes on, and what c1 reads is its own answers
	// only, from the same flow.
	if again := udpAsk(t, c1, "legit again"); again != flowAddr {
		t.Fatalf("the flow moved from %s to %s", flowAddr, again)
	}
	_ = c1.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 4096)
	for {
		n, err := c1.Read(buf)
		if err != nil {
			break
		}
		if bytes.Contains(buf[:n], []byte("evil")) || !strings.HasPrefix(string(buf[:n]), "legit") {
			t.Fatalf("the client socket got %q", buf[:n])
		}
	}
}
