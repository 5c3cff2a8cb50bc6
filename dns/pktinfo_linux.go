//go:build linux

package dns

import (
	"encoding/binary"
	"net"

	"golang.org/x/sys/unix"
)

// Replies from the queried address (IP_PKTINFO / IPV6_RECVPKTINFO).
//
// A socket bound to 0.0.0.0 or [::] receives queries sent to any of the
// host's addresses, and a plain sendto lets the kernel pick the reply's
// source by routing, which may be another address of the host: a client
// that checks where the answer came from (a connected socket, most stub
// resolvers) drops it. With the option on, each datagram arrives with a
// control message naming the address it was sent to, and the reply
// carries it back (ipi_spec_dst / ipi6_addr), so it leaves from there.
// Only sockets bound to an unspecified address turn it on; the others
// read and write without control messages.
//
// Why not golang.org/x/net/ipv4.PacketConn.SetControlMessage: it parses
// every control message into a new ControlMessage (allocations on the
// answer path), and the batched reader needs the raw bytes anyway.

const havePktinfo = true

// ctlSize is the control buffer of one datagram: room for an IPv4 and
// an IPv6 packet-info message.
const ctlSize = 128

// enablePktinfo asks the kernel for the destination address of every
// datagram on c.
func enablePktinfo(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	v4 := c.LocalAddr().(*net.UDPAddr).IP.To4() != nil
	var serr error
	err = rc.Control(func(fd uintptr) {
		if v4 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
			return
		}
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
		// IPv4-mapped queries on a dual-stack socket report IP_PKTINFO.
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

var cmsgHdr = unix.CmsgLen(0)

// struct cmsghdr {size_t len; int level; int type}: size_t is 8 bytes on
// 64-bit platforms, 4 on 32-bit ones.
const lenSize = unix.SizeofCmsghdr - 8

func cmsgLen(b []byte) int {
	if lenSize == 8 {
		return int(binary.NativeEndian.Uint64(b))
	}
	return int(binary.NativeEndian.Uint32(b))
}

func putCmsg(b []byte, dataLen int, level, typ int32) {
	if lenSize == 8 {
		binary.NativeEndian.PutUint64(b, uint64(unix.CmsgLen(dataLen)))
	} else {
		binary.NativeEndian.PutUint32(b, uint32(unix.CmsgLen(dataLen)))
	}
	binary.NativeEndian.PutUint32(b[lenSize:], uint32(level))
	binary.NativeEndian.PutUint32(b[lenSize+4:], uint32(typ))
}

// replyControl turns the control messages a query arrived with (in) into
// the one its reply is sent with (written to out): the same destination
// address as the reply's source. It returns the length written, 0 when
// in names no destination. No allocation.
func replyControl(in, out []byte) int {
	ne := binary.NativeEndian
	for len(in) >= cmsgHdr {
		l := cmsgLen(in)
		if l < cmsgHdr || l > len(in) {
			return 0
		}
		level, typ := int32(ne.Uint32(in[lenSize:])), int32(ne.Uint32(in[lenSize+4:]))
		data := in[cmsgHdr:l]
		switch {
		case level == unix.IPPROTO_IP && typ == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			// struct in_pktinfo {int ifindex; in_addr spec_dst; in_addr addr}:
			// reply from addr (the header's destination), any interface.
			n := unix.CmsgSpace(unix.SizeofInet4Pktinfo)
			if len(out) < n {
				return 0
			}
			clear(out[:n])
			putCmsg(out, unix.SizeofInet4Pktinfo, unix.IPPROTO_IP, unix.IP_PKTINFO)
			copy(out[cmsgHdr+4:cmsgHdr+8], data[8:12]) // spec_dst = addr
			return n
		case level == unix.IPPROTO_IPV6 && typ == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			// struct in6_pktinfo {in6_addr addr; unsigned ifindex}: sent
			// back as it came (the interface matters for link-local).
			n := unix.CmsgSpace(unix.SizeofInet6Pktinfo)
			if len(out) < n {
				return 0
			}
			clear(out[:n])
			putCmsg(out, unix.SizeofInet6Pktinfo, unix.IPPROTO_IPV6, unix.IPV6_PKTINFO)
			copy(out[cmsgHdr:cmsgHdr+unix.SizeofInet6Pktinfo], data[:unix.SizeofInet6Pktinfo])
			return n
		}
		next := unix.CmsgSpace(l - cmsgHdr)
		if next > len(in) {
			return 0
		}
		in = in[next:]
	}
	return 0
}
