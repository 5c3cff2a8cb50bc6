package dns

import (
	"bytes"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReplyControl(t *testing.T) {
	// An IPv4 packet-info message as the kernel writes it for a query to
	// 127.0.0.2 on interface 1.
	in := make([]byte, unix.CmsgSpace(unix.SizeofInet4Pktinfo))
	putCmsg(in, unix.SizeofInet4Pktinfo, unix.IPPROTO_IP, unix.IP_PKTINFO)
	d := in[cmsgHdr:]
	d[0] = 1                                    // ifindex (native endian, low byte first on amd64/arm64)
	copy(d[4:8], net.IPv4(127, 0, 0, 2).To4())  // spec_dst
	copy(d[8:12], net.IPv4(127, 0, 0, 2).To4()) // addr
	out := make([]byte, ctlSize)
	n := replyControl(in, out)
	if n != len(in) {
		t.Fatalf("replyControl = %d, want %d", n, len(in))
	}
	o := out[cmsgHdr:]
	if !bytes.Equal(o[0:4], []byte{0, 0, 0, 0}) || !bytes.Equal(o[4:8], []byte{127, 0, 0, 2}) {
		t.Fatalf("reply pktinfo = %x, want ifindex 0 and spec_dst 127.0.0.2", o[:12])
	}
	if replyControl(in[:cmsgHdr-1], out) != 0 || replyControl(nil, out) != 0 || replyControl(in, out[:4]) != 0 {
		t.Fatal("short input or output must give 0")
	}
}

// FuzzReplyControl: any control bytes give no panic and a length that
// fits the output.
func FuzzReplyControl(f *testing.F) {
	in := make([]byte, unix.CmsgSpace(unix.SizeofInet4Pktinfo))
	putCmsg(in, unix.SizeofInet4Pktinfo, unix.IPPROTO_IP, unix.IP_PKTINFO)
	f.Add(in)
	in6 := make([]byte, unix.CmsgSpace(unix.SizeofInet6Pktinfo))
	putCmsg(in6, unix.SizeofInet6Pktinfo, unix.IPPROTO_IPV6, unix.IPV6_PKTINFO)
	f.Add(in6)
	f.Add(append(append([]byte(nil), in6...), in...))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0, 8, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		out := make([]byte, ctlSize)
		if n := replyControl(in, out); n < 0 || n > len(out) {
			t.Fatalf("replyControl = %d", n)
		}
	})
}
