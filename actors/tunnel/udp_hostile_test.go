package tunnel

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"runtime"
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

// A local program that floods a UDP tunnel whose service reads nothing:
// nothing on the way keeps the datagrams (UDP loses them where a buffer
// is full), so the process's heap does not grow with what was sent, and
// the flow answers again once the service reads.
func TestUDPFloodToStalledService(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, true)
	a, b := tn.node(nil), tn.node(nil)
	connect(t, a, b)
	svc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { svc.Close(); <-done })
	go func() { // an echo service that reads nothing until the gate opens
		defer close(done)
		select {
		case <-gate:
		case <-t.Context().Done():
			return
		}
		buf := make([]byte, 4096)
		for {
			n, from, err := svc.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = svc.WriteToUDP(append(buf[:n:n], "|"+from.String()...), from)
		}
	}()
	o := targetOpts(svc.LocalAddr().String())
	o.UDP = true
	_, url := a.createServer(o)
	b.own("flood.p2p")
	_, addr := b.createUDPClient("flood.p2p", url)
	c := udpSocket(t, addr)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	payload := bytes.Repeat([]byte{'f'}, 1000)
	const sent = 100_000 // 100 MB
	for i := 0; i < sent; i++ {
		_, _ = c.Write(payload)
	}
	if grew := int64(heap()) - int64(before); grew > 32<<20 {
		t.Fatalf("the heap grew by %d bytes with %d bytes sent to a stalled service", grew, sent*len(payload))
	}
	close(gate)
	udpAsk(t, c, "after the flood")
}
