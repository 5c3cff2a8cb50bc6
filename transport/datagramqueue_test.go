package transport

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// A peer on a stream path whose datagrams nobody reads (its session is
// not up yet, or its reader is behind) can make us hold no more of its datagrams than a QUIC
// connection would hold of its unread data (its initial connection
// window, 1 MiB): keys cost nothing, and every pending place would
// otherwise hold 512 datagrams of up to 64 KiB, 32 MiB each.
func TestStreamPathDatagramQueueBounded(t *testing.T) {
	a, b := newMulti(t, Options{}), newMulti(t, Options{})
	out, in := tcpPair(t, b, a)
	sc := in.(*streamConn)
	// b writes the datagram frames itself, then ends its datagram
	// stream, so a's reader ends once it has taken them all.
	dg := out.(*streamConn).dgram
	frame := make([]byte, 2+maxStreamDatagram)
	frame[0], frame[1] = 0xff, 0xff
	const sent = 600
	for range sent {
		if _, err := dg.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	_ = dg.Close()
	testutil.Eventually(t, 20*time.Second, func() error {
		if n := strings.Count(stacks(), "(*streamConn).readDatagrams"); n > 1 {
			return fmt.Errorf("%d datagram readers still reading", n)
		}
		return nil
	})
	if held := len(sc.dgIn) * maxStreamDatagram; held > 1<<20 {
		t.Fatalf("a peer's %d datagrams left %d of them (%d bytes) queued", sent, len(sc.dgIn), held)
	}
}

func stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
