//go:build linux && (amd64 || arm64)

package dns

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// TestBatchAllocs: reading a batch from a real socket, answering it from
// the table and writing the answers allocates nothing.
func TestBatchAllocs(t *testing.T) {
	pub, local := testSources(t)
	s, err := New(Config{Addr: "127.0.0.1:0", ResolvConf: "/nonexistent"}, pub, local, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl, err := net.DialUDP("udp", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rc, err := srv.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	b := newBatch(rc, 1232)
	q, _ := new(dns.Msg).SetQuestion("a.local.", dns.TypeA).Pack()
	reply := make([]byte, 1232)
	tab := s.Table()
	round := func() {
		for i := 0; i < 3; i++ {
			if _, err := cl.Write(q); err != nil {
				t.Fatal(err)
			}
		}
		got := 0
		for got < 3 {
			n, err := b.read()
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				m := tab.Fast(b.bufs[i][:b.in[i].n], b.obufs[i], 1232, 1232)
				if m == 0 {
					t.Fatal("not answered on the fast path")
				}
				b.reply(i, i, m)
			}
			if failed, err := b.write(n); err != nil || failed != 0 {
				t.Fatalf("write: %d failed, %v", failed, err)
			}
			got += n
		}
		for i := 0; i < 3; i++ {
			n, err := cl.Read(reply)
			if err != nil {
				t.Fatal(err)
			}
			var m dns.Msg
			if err := m.Unpack(reply[:n]); err != nil || len(m.Answer) != 2 {
				t.Fatalf("reply %v %v", &m, err)
			}
		}
	}
	round()
	if src := b.source(0); src.String() != cl.LocalAddr().String() {
		t.Fatalf("source = %s, want %s", src, cl.LocalAddr())
	}
	// The client's Unpack allocates; count only the server side.
	var srvAllocs float64
	for i := 0; i < 3; i++ {
		if _, err := cl.Write(q); err != nil {
			t.Fatal(err)
		}
	}
	srvAllocs = testing.AllocsPerRun(50, func() {
		if _, err := cl.Write(q); err != nil {
			t.Fatal(err)
		}
		n, err := b.read()
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			b.reply(i, i, tab.Fast(b.bufs[i][:b.in[i].n], b.obufs[i], 1232, 1232))
		}
		if _, err := b.write(n); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if _, err := cl.Read(reply); err != nil {
				t.Fatal(err)
			}
		}
	})
	if srvAllocs != 0 {
		t.Fatalf("batched read/answer/write allocates %v times per round, want 0", srvAllocs)
	}
}
