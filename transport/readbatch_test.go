package transport

import (
	"net"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
)

// quic-go reads through ReadBatch when the connection has one (its
// batchConn interface).
var _ interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
} = (*lossyConn)(nil)

func TestLossyConnReadBatch(t *testing.T) {
	rc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	c := newLossyConn(rc, nil)
	sc, err := net.DialUDP("udp", nil, rc.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	const sent = 3 * yieldEvery // several yields' worth of single-datagram batches
	for i := range sent {
		if _, err := sc.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	_ = rc.SetReadDeadline(time.Now().Add(5 * time.Second))
	ms := make([]ipv4.Message, 1)
	ms[0].Buffers = [][]byte{make([]byte, 16)}
	for i := range sent {
		n, err := c.ReadBatch(ms, 0)
		if err != nil || n != 1 {
			t.Fatalf("batch %d: n=%d err=%v", i, n, err)
		}
		if ms[0].N != 1 || ms[0].Buffers[0][0] != byte(i) {
			t.Fatalf("batch %d: got %d bytes %v", i, ms[0].N, ms[0].Buffers[0][:ms[0].N])
		}
	}
}
