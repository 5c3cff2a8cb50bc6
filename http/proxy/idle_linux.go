package proxy

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// idlePeek looks into a pooled upstream connection's socket without
// taking anything from it (idleReadable). Made once per connection: its
// RawConn and func allocate nothing per look.
type idlePeek struct {
	raw      syscall.RawConn // nil: the connection is no socket of this machine (a peer's tunnel stream)
	look     func(fd uintptr)
	buf      [1]byte
	readable bool
}

// idleReadable reports whether the upstream's socket under c has
// something to read (bytes, its end, an error) before a request is sent
// on it: one recvfrom(2) with MSG_PEEK and MSG_DONTWAIT, which waits for
// nothing and takes nothing (see idleSpoke). A connection that is not a
// TCP socket of this machine reports false.
func (c *movingDeadlines) idleReadable() bool {
	p := c.peek
	if p == nil {
		p = &idlePeek{}
		c.peek = p
		var tc *net.TCPConn
		if ts, ok := c.Conn.(tcpSource); ok {
			tc = ts.TCPConn()
		} else {
			tc, _ = c.Conn.(*net.TCPConn)
		}
		if tc == nil {
			return false
		}
		raw, err := tc.SyscallConn()
		if err != nil {
			return false
		}
		p.raw = raw
		p.look = func(fd uintptr) {
			// A raw system call: unix.Recvfrom allocates the sender's
			// address at each call, and this one never blocks.
			_, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&p.buf[0])), 1,
				unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
			// No error: bytes, or (none) the upstream closed;
			// EAGAIN: nothing; anything else (a reset) is no
			// connection to use either.
			p.readable = errno == 0 || errno != unix.EAGAIN && errno != unix.EINTR
		}
	}
	if p.raw == nil {
		return false
	}
	if p.raw.Control(p.look) != nil {
		return true // closed under us: not to be used
	}
	return p.readable
}
