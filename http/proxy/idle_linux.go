package proxy

import (
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// idlePeek looks into a pooled upstream connection's socket without
// taking anything from it (idleReadable). Made once per connection.
type idlePeek struct {
	// fd is the socket's descriptor, read once through its RawConn; -1:
	// the connection is no socket of this machine (a peer's tunnel
	// stream).
	fd  int
	buf [1]byte
}

// idleReadable reports whether the upstream's socket under c has
// something to read (bytes, its end, an error) before a request is sent
// on it: one recvfrom(2) with MSG_PEEK and MSG_DONTWAIT, which waits for
// nothing and takes nothing (see idleSpoke). A connection that is not a
// TCP socket of this machine reports false.
//
// The descriptor is read once, and the look made on it directly rather
// than inside RawConn.Control, whose lock on the descriptor was half of
// the look's cost (perf, the same-node route at 100 B:
// docs/bench-history.md). It is safe here because the connection is
// the caller's alone between the pool handing it out and the request
// being written: nothing closes it meanwhile (the pool's cleaner closes
// only connections in its idle list, and the connection's own halts are
// set only once the request goes), so the descriptor is still this
// socket's. Were it ever not, the look would still take nothing from
// whichever socket holds the number now (MSG_PEEK): the worst it could
// do is close this connection unused.
func (c *movingDeadlines) idleReadable() bool {
	p := c.peek
	if p == nil {
		p = &idlePeek{fd: -1}
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
		if raw.Control(func(fd uintptr) { p.fd = int(fd) }) != nil {
			return true // closed under us: not to be used
		}
	}
	if p.fd < 0 {
		return false
	}
	// A raw system call: unix.Recvfrom allocates the sender's address at
	// each call, and this one never blocks.
	_, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(p.fd), uintptr(unsafe.Pointer(&p.buf[0])), 1,
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	// No error: bytes, or (none) the upstream closed; EAGAIN: nothing;
	// anything else (a reset) is no connection to use either.
	return errno == 0 || errno != unix.EAGAIN && errno != unix.EINTR
}
