package tunnel

import (
	"io"
	"net"
	"testing"
)

// BenchmarkTunnelThroughput is bytes a second one way through a tunnel
// over QUIC on loopback and over the in-memory transport: local TCP → client → stream → server →
// TCP sink, 1 MiB per op.
func BenchmarkTunnelThroughput(b *testing.B) {
	for _, quic := range []bool{false, true} {
		b.Run(map[bool]string{true: "quic", false: "mem"}[quic], func(b *testing.B) { benchThroughput(b, quic) })
	}
}

func benchThroughput(b *testing.B, quic bool) {
	tn := newTestNet(b, quic)
	srv, cli := tn.node(nil), tn.node(nil)
	connect(b, srv, cli)
	sink := tcpServer(b, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	_, url := srv.createServer(targetOpts(sink))
	cli.own("bench.p2p")
	_, addr := cli.createClient("bench.p2p", url)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	chunk := make([]byte, 1<<20)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
}
