package transport

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"

	"peerdns/internal/udpgro"
)

// Send errors are packet loss.
//
// A datagram the kernel refuses to send is, to the protocol above, a
// datagram the network lost: a host firewall's output rule that drops it
// (sendmsg fails with EPERM), a full conntrack table (EPERM), a send
// queue out of buffers (ENOBUFS), a route that is briefly gone
// (ENETUNREACH, EHOSTUNREACH, ENETDOWN). quic-go treats any error from
// the socket as fatal and closes every connection on it at once, which
// turned 2% of dropped outgoing UDP into no connection at all. lossyConn
// sits between quic-go and the socket and turns exactly these errors
// into "sent, then lost": the write reports success, the packet counts
// in SendLosses, and QUIC's loss recovery resends what mattered, as it
// does for a packet dropped on the wire.
//
// What still fails: EMSGSIZE (quic-go's path MTU discovery reads it),
// EIO (quic-go falls back from GSO on it), a closed socket, EINVAL and
// anything else that says the socket or the call is wrong rather than
// that one packet did not go.
//
// lossyConn embeds *net.UDPConn and overrides only the write methods
// (and ReadBatch: reads go through internal/udpgro), so it keeps every
// method quic-go's feature detection looks for (SyscallConn,
// SetReadBuffer, ReadMsgUDP, WriteMsgUDP, net.Conn): quic-go still reads
// in batches, sets DF, and uses GSO and ECN on Linux, because both are decided from the socket's file descriptor and
// the out-of-band data we pass through untouched (TestLossyConnKeepsGSOAndECN
// sees UDP_SEGMENT and IP_TOS control messages go through the wrapper).

// IsTransientSendErr reports whether err from a UDP send means "this one
// datagram did not go" rather than "the socket is broken": the errors a
// firewall, a full conntrack table, a short buffer or a flapping route
// return. UDP users treat them as a lost datagram and go on.
func IsTransientSendErr(err error) bool {
	if err == nil {
		return false
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case syscall.EPERM, syscall.EACCES, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.ENETDOWN,
		syscall.EHOSTDOWN, syscall.ECONNREFUSED:
		return true
	}
	return false
}

// sendLossLogEvery bounds the log lines about lost sends: the first one
// is logged, then at most one line (with the count since) per period.
const sendLossLogEvery = 30 * time.Second

// lossyConn is the UDP socket quic-go writes through (see above).
type lossyConn struct {
	*net.UDPConn
	gro     *udpgro.Reader // quic-go reads through it (ReadBatch)
	log     *slog.Logger
	lost    atomic.Int64
	lastLog atomic.Int64 // unix ns of the last log line
	logged  atomic.Int64 // lost at the last log line
	// onWrite, when set (tests only), sees every datagram and its
	// out-of-band data before it is written.
	onWrite func(b, oob []byte)
}

func newLossyConn(c *net.UDPConn, log *slog.Logger) *lossyConn {
	return &lossyConn{UDPConn: c, gro: udpgro.New(c), log: log}
}

// ReadBatch is quic-go's hook for reading the socket: through
// internal/udpgro, which reads datagrams the kernel merged (UDP_GRO)
// and hands them on packet by packet.
func (c *lossyConn) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	return c.gro.ReadBatch(ms, flags)
}

// lose counts a refused send and logs it, rate-limited.
func (c *lossyConn) lose(err error) {
	n := c.lost.Add(1)
	now := time.Now().UnixNano()
	last := c.lastLog.Load()
	if last != 0 && now-last < int64(sendLossLogEvery) {
		return
	}
	if !c.lastLog.CompareAndSwap(last, now) {
		return
	}
	since := n - c.logged.Swap(n)
	if c.log != nil {
		c.log.Warn("udp send refused by the host, counted as lost", "err", err, "lost_since_last_line", since, "lost_total", n)
	}
}

// filter turns a transient error into success.
func (c *lossyConn) filter(n int, size int, err error) (int, error) {
	if err != nil && IsTransientSendErr(err) {
		c.lose(err)
		return size, nil
	}
	return n, err
}

func (c *lossyConn) WriteMsgUDP(b, oob []byte, addr *net.UDPAddr) (int, int, error) {
	if c.onWrite != nil {
		c.onWrite(b, oob)
	}
	n, oobn, err := c.UDPConn.WriteMsgUDP(b, oob, addr)
	if err != nil && IsTransientSendErr(err) {
		c.lose(err)
		return len(b), len(oob), nil
	}
	return n, oobn, err
}

func (c *lossyConn) WriteMsgUDPAddrPort(b, oob []byte, addr netip.AddrPort) (int, int, error) {
	if c.onWrite != nil {
		c.onWrite(b, oob)
	}
	n, oobn, err := c.UDPConn.WriteMsgUDPAddrPort(b, oob, addr)
	if err != nil && IsTransientSendErr(err) {
		c.lose(err)
		return len(b), len(oob), nil
	}
	return n, oobn, err
}

func (c *lossyConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	if c.onWrite != nil {
		c.onWrite(b, nil)
	}
	n, err := c.UDPConn.WriteTo(b, addr)
	return c.filter(n, len(b), err)
}

func (c *lossyConn) WriteToUDP(b []byte, addr *net.UDPAddr) (int, error) {
	if c.onWrite != nil {
		c.onWrite(b, nil)
	}
	n, err := c.UDPConn.WriteToUDP(b, addr)
	return c.filter(n, len(b), err)
}

func (c *lossyConn) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	if c.onWrite != nil {
		c.onWrite(b, nil)
	}
	n, err := c.UDPConn.WriteToUDPAddrPort(b, addr)
	return c.filter(n, len(b), err)
}

func (c *lossyConn) Write(b []byte) (int, error) {
	if c.onWrite != nil {
		c.onWrite(b, nil)
	}
	n, err := c.UDPConn.Write(b)
	return c.filter(n, len(b), err)
}

// GRO reports whether the socket delivers datagrams the kernel merged
// (internal/udpgro), and GROMerged how many such datagrams were read.
func (e *QUICEndpoint) GRO() (on bool, merged int64) {
	if e.lossy == nil {
		return false, 0
	}
	return e.lossy.gro.GRO(), e.lossy.gro.Merged.Load()
}

// SendLosses counts datagrams the host refused to send (a firewall's
// output drop, a full conntrack table, no buffers, no route for a
// moment), each counted as lost instead of closing the connections on
// the socket.
func (e *QUICEndpoint) SendLosses() int64 {
	if e.lossy == nil {
		return 0
	}
	return e.lossy.lost.Load()
}
