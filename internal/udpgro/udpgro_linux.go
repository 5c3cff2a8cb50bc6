package udpgro

import (
	"encoding/binary"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

const msgTrunc = unix.MSG_TRUNC

// setGRO sets UDP_GRO on c's socket, or clears it.
func setGRO(c *net.UDPConn, on bool) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		v := 0
		if on {
			v = 1
		}
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, v)
	}); err != nil {
		return false
	}
	return serr == nil
}

// buffers maps n bytes of anonymous memory for r's datagrams (see
// "Memory" in the package doc), unmapped once r is unreachable; nil if
// the kernel refuses.
func buffers(r *Reader, n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	runtime.AddCleanup(r, func(b []byte) { _ = unix.Munmap(b) }, b)
	return b
}

// nextCmsg reads the control message at the start of b: its level,
// type and data, the bytes it takes with its padding (whole), and what
// follows. ok is false when b does not start with a whole one. It reads
// the header field by field (struct cmsghdr: a size_t length, then two
// ints) rather than through a pointer, so any bytes at all parse
// safely; x/sys's ParseOneSocketControlMessage converts a pointer to a
// header even when fewer bytes are left.
func nextCmsg(b []byte) (level, typ int32, data, whole, rest []byte, ok bool) {
	const hdr = unix.SizeofCmsghdr
	if len(b) < hdr {
		return 0, 0, nil, nil, nil, false
	}
	var n uint64
	if hdr == 16 {
		n = binary.NativeEndian.Uint64(b)
	} else {
		n = uint64(binary.NativeEndian.Uint32(b))
	}
	if n < hdr || n > uint64(len(b)) {
		return 0, 0, nil, nil, nil, false
	}
	level = int32(binary.NativeEndian.Uint32(b[hdr-8:]))
	typ = int32(binary.NativeEndian.Uint32(b[hdr-4:]))
	space := min(unix.CmsgSpace(int(n)-hdr), len(b))
	return level, typ, b[hdr:n], b[:space], b[space:], true
}

// splitOOB returns the segment size the UDP_GRO control message in oob
// gives (0 when there is none: the datagram was not merged) and appends
// oob's other control messages to rest. A control message that does not
// parse ends the walk: what came before it is kept.
func splitOOB(oob, rest []byte) (seg int, _ []byte) {
	for len(oob) > 0 {
		level, typ, data, whole, remainder, ok := nextCmsg(oob)
		if !ok {
			break
		}
		if level == unix.IPPROTO_UDP && typ == unix.UDP_GRO && len(data) >= 4 {
			seg = int(int32(binary.NativeEndian.Uint32(data)))
		} else {
			rest = append(rest, whole...)
		}
		oob = remainder
	}
	return seg, rest
}

// appendWhole appends the control messages of oob to dst that fit in
// dst's capacity, whole ones only (a cut one would not parse), and
// returns the length of dst.
func appendWhole(dst, oob []byte) int {
	for len(oob) > 0 {
		_, _, _, whole, remainder, ok := nextCmsg(oob)
		if !ok || len(dst)+len(whole) > cap(dst) {
			break
		}
		dst = append(dst, whole...)
		oob = remainder
	}
	return len(dst)
}
