package transport

import (
	"bytes"
	"crypto/sha256"
	"testing"
)

// A bulk stream between two endpoints on loopback arrives whole and in
// order while the receiver reads datagrams the kernel merged (quic-go's
// GSO sends reach a UDP_GRO socket as one buffer): the packets cut from
// them are the packets sent.
func TestBulkStreamOverMergedDatagrams(t *testing.T) {
	a, _ := newTestEndpoint(t)
	c, _ := newTestEndpoint(t)
	if on, _ := a.GRO(); !on {
		t.Skip("UDP_GRO is off (PEERDNS_DISABLE_GRO is set, or the kernel is older than Linux 5.0): quic-go reads packet by packet, as the other tests exercise")
	}
	in, out := connect(t, a, c)
	payload := make([]byte, 8<<20)
	for i := range payload {
		payload[i] = byte(i*7 + i>>12)
	}
	got, err := streamOnce(t, in, out, payload)
	if err != nil {
		t.Fatal(err)
	}
	b := <-got
	if !bytes.Equal(b, payload) {
		t.Fatalf("received %d bytes (sha256 %x), sent %d (%x)", len(b), sha256.Sum256(b), len(payload), sha256.Sum256(payload))
	}
	_, merged := a.GRO()
	if merged == 0 {
		t.Fatal("8 MiB arrived without one merged datagram: the receiver's socket is not read through UDP_GRO")
	}
	t.Logf("merged datagrams read: %d", merged)
}
