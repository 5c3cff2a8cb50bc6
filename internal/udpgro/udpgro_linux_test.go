package udpgro

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// pair is a receiving socket read by a Reader and a sending socket, on
// loopback.
func pair(t *testing.T) (*net.UDPConn, *Reader, *net.UDPConn) {
	t.Helper()
	rc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	sc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	// As quic-go does: ask for the ECN bits of every datagram.
	raw, _ := rc.SyscallConn()
	raw.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1) })
	return rc, New(rc), sc
}

// cmsg is one control message.
func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

func u16(v uint16) []byte { b := make([]byte, 2); binary.NativeEndian.PutUint16(b, v); return b }
func i32(v int32) []byte  { b := make([]byte, 4); binary.NativeEndian.PutUint32(b, uint32(v)); return b }

// messages is a batch as quic-go passes it: 8 messages of 1,452-byte
// buffers and 128 bytes of room for control messages.
func messages(n int) []ipv4.Message {
	ms := make([]ipv4.Message, n)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, 1452)}
		ms[i].OOB = make([]byte, 128)
	}
	return ms
}

// readPackets reads until want packets came, in batches of 8.
func readPackets(t *testing.T, rc *net.UDPConn, r *Reader, want int) (pkts [][]byte, oobs [][]byte, addrs []net.Addr, batches []int) {
	t.Helper()
	rc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for len(pkts) < want {
		ms := messages(8)
		n, err := r.ReadBatch(ms, 0)
		if err != nil {
			t.Fatalf("after %d of %d packets: %v", len(pkts), want, err)
		}
		batches = append(batches, n)
		for _, m := range ms[:n] {
			pkts = append(pkts, bytes.Clone(m.Buffers[0][:m.N]))
			oobs = append(oobs, bytes.Clone(m.OOB[:m.NN]))
			addrs = append(addrs, m.Addr)
		}
	}
	return
}

func requireGRO(t *testing.T, r *Reader) {
	t.Helper()
	if !r.GRO() {
		t.Skip("UDP_GRO is off (PEERDNS_DISABLE_GRO is set, or the kernel is older than Linux 5.0): the Reader reads packet by packet, tested in TestReadBatchWithoutGRO")
	}
}

// A GSO send of 14 segments of 1,200 bytes and a 500-byte tail, marked
// ECT(0), arrives merged and is handed on as 15 packets, each with its
// bytes, the sender's address and the ECN control message, no UDP_GRO.
func TestReadBatchCutsAMergedDatagram(t *testing.T) {
	rc, r, sc := pair(t)
	requireGRO(t, r)
	payload := make([]byte, 14*1200+500)
	for i := range payload {
		payload[i] = byte(i / 1200)
	}
	oob := append(cmsg(unix.IPPROTO_UDP, unix.UDP_SEGMENT, u16(1200)), cmsg(unix.IPPROTO_IP, unix.IP_TOS, i32(2))...)
	if _, _, err := sc.WriteMsgUDP(payload, oob, rc.LocalAddr().(*net.UDPAddr)); err != nil {
		t.Fatalf("GSO send: %v", err)
	}
	pkts, oobs, addrs, batches := readPackets(t, rc, r, 15)
	if len(pkts) != 15 || len(batches) != 2 || batches[0] != 8 || batches[1] != 7 {
		t.Fatalf("%d packets in batches %v; want 15 in 8 + 7 (one datagram cut up)", len(pkts), batches)
	}
	for i, p := range pkts {
		want := payload[i*1200 : min((i+1)*1200, len(payload))]
		if !bytes.Equal(p, want) {
			t.Fatalf("packet %d: %d bytes, not the segment's %d", i, len(p), len(want))
		}
		if addrs[i].String() != sc.LocalAddr().String() {
			t.Fatalf("packet %d from %v, sent from %v", i, addrs[i], sc.LocalAddr())
		}
		seg, rest := splitOOB(oobs[i], nil)
		if seg != 0 || !bytes.Contains(oobs[i], cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{2})[:unix.CmsgLen(1)]) || len(rest) != len(oobs[i]) {
			t.Fatalf("packet %d: control messages %x; want IP_TOS 2 and no UDP_GRO", i, oobs[i])
		}
	}
}

// A batch with no room reads nothing and leaves the datagram for the
// next call, without waiting.
func TestReadBatchNoRoom(t *testing.T) {
	rc, r, sc := pair(t)
	requireGRO(t, r)
	if _, err := sc.WriteTo([]byte("kept"), rc.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	if n, err := r.ReadBatch(nil, 0); n != 0 || err != nil {
		t.Fatalf("ReadBatch(nil) = %d, %v", n, err)
	}
	pkts, _, _, _ := readPackets(t, rc, r, 1)
	if string(pkts[0]) != "kept" {
		t.Fatalf("read %q", pkts[0])
	}
}

// Datagrams sent one by one (no GSO) of different sizes come one packet
// each, in order, several per batch.
func TestReadBatchSingleDatagrams(t *testing.T) {
	rc, r, sc := pair(t)
	var sent [][]byte
	for i := range 20 {
		b := bytes.Repeat([]byte{byte(i)}, 100+i*60)
		sent = append(sent, b)
		if _, err := sc.WriteTo(b, rc.LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	pkts, _, _, _ := readPackets(t, rc, r, len(sent))
	for i := range sent {
		if !bytes.Equal(pkts[i], sent[i]) {
			t.Fatalf("packet %d: %d bytes, sent %d", i, len(pkts[i]), len(sent[i]))
		}
	}
}

// With PEERDNS_DISABLE_GRO the socket is read packet by packet: a GSO
// send still arrives whole, cut by the kernel.
func TestReadBatchWithoutGRO(t *testing.T) {
	t.Setenv("PEERDNS_DISABLE_GRO", "1")
	rc, r, sc := pair(t)
	if r.GRO() {
		t.Fatal("GRO on although PEERDNS_DISABLE_GRO is set")
	}
	payload := bytes.Repeat([]byte("x"), 5*1000)
	if _, _, err := sc.WriteMsgUDP(payload, cmsg(unix.IPPROTO_UDP, unix.UDP_SEGMENT, u16(1000)), rc.LocalAddr().(*net.UDPAddr)); err != nil {
		t.Fatalf("GSO send: %v", err)
	}
	pkts, _, _, _ := readPackets(t, rc, r, 5)
	for i, p := range pkts {
		if len(p) != 1000 {
			t.Fatalf("packet %d: %d bytes", i, len(p))
		}
	}
}

// Control messages cut to the room quic-go gives are cut between
// messages, never inside one.
func TestAppendWholeKeepsWholeMessages(t *testing.T) {
	a := cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{1})
	b := cmsg(unix.IPPROTO_IP, unix.IP_PKTINFO, make([]byte, 12))
	oob := append(append([]byte{}, a...), b...)
	for _, c := range []struct{ room, want int }{{len(a) + len(b), len(a) + len(b)}, {len(a) + len(b) - 1, len(a)}, {len(a) - 1, 0}} {
		if got := appendWhole(make([]byte, 0, c.room), oob); got != c.want {
			t.Errorf("room %d: %d bytes kept, want %d", c.room, got, c.want)
		}
	}
}

func FuzzSplitOOB(f *testing.F) {
	f.Add(append(cmsg(unix.IPPROTO_UDP, unix.UDP_GRO, i32(1452)), cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{2})...))
	f.Add(cmsg(unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, make([]byte, 20)))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, oob []byte) {
		seg, rest := splitOOB(oob, nil)
		if len(rest) > len(oob) || (seg != 0 && len(rest) == len(oob)) {
			t.Fatalf("%d bytes of control messages out of %d, segment size %d", len(rest), len(oob), seg)
		}
		if seg2, again := splitOOB(rest, nil); seg2 != 0 || !bytes.Equal(again, rest) {
			t.Fatalf("what is left (%x) still holds UDP_GRO %d, or does not parse whole", rest, seg2)
		}
		for room := 0; room <= len(rest); room += 8 {
			n := appendWhole(make([]byte, 0, room), rest)
			if n > room {
				t.Fatalf("%d bytes in %d of room", n, room)
			}
			if _, kept := splitOOB(rest[:n], nil); len(kept) != n {
				t.Fatalf("%s: a cut control message", fmt.Sprint(rest[:n]))
			}
		}
	})
}

// A backlog read on one P lets the connection's goroutine run once its
// queue holds YieldAfter packets, with and without UDP_GRO: the
// reader stands for quic-go's (it queues every packet it is handed and
// wakes the connection), the connection takes everything queued each
// time it runs. Without the yield the reader keeps the P until the
// socket is empty and the whole backlog sits queued at once.
func TestReadBatchLetsTheConnectionsRun(t *testing.T) {
	for _, gro := range []bool{true, false} {
		t.Run(fmt.Sprintf("gro=%v", gro), func(t *testing.T) {
			if !gro {
				t.Setenv("PEERDNS_DISABLE_GRO", "1")
			}
			rc, r, sc := pair(t)
			if r.GRO() != gro {
				t.Skipf("UDP_GRO is %v on this kernel; the case for %v needs Linux 5.0 or later", r.GRO(), gro)
			}
			// The backlog must fit the socket: 600 datagrams take
			// about 0.7 MB of receive buffer, more than the default.
			raw, _ := rc.SyscallConn()
			var serr error
			raw.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
			})
			if serr != nil {
				t.Skipf("SO_RCVBUFFORCE: %v: the test needs root (CAP_NET_ADMIN), as CI runs it", serr)
			}
			const backlog = 600
			for i := range backlog {
				if _, err := sc.WriteTo(bytes.Repeat([]byte{byte(i)}, 100), rc.LocalAddr()); err != nil {
					t.Fatal(err)
				}
			}
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			var queued atomic.Int64
			wake, done := make(chan struct{}, 1), make(chan struct{})
			defer close(done)
			go func() {
				for {
					select {
					case <-wake:
						queued.Store(0)
					case <-done:
						return
					}
				}
			}()
			rc.SetReadDeadline(time.Now().Add(10 * time.Second))
			var most int64
			for got := 0; got < backlog; {
				ms := messages(8)
				k, err := r.ReadBatch(ms, 0)
				if err != nil {
					t.Fatalf("after %d of %d packets: %v", got, backlog, err)
				}
				got += k
				most = max(most, queued.Add(int64(k)))
				select {
				case wake <- struct{}{}:
				default:
				}
			}
			// The yield comes at the first call after YieldAfter
			// packets, so the last batch before it may pass the bound;
			// and once in 61 schedules the runtime takes the yielding
			// goroutine off its global queue before the local one, so
			// a yield may come straight back: the next one is
			// YieldAfter packets on.
			if most >= 2*YieldAfter+8 {
				t.Fatalf("%d packets queued at once; the reader should have let the connection run every %d", most, YieldAfter)
			}
		})
	}
}
