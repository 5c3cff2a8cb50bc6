package dns

import (
	"net"

	"golang.org/x/sys/unix"
)

// steerByCPU attaches a classic BPF program to the SO_REUSEPORT group of
// the server's UDP sockets that picks, for each datagram, the socket whose
// index is the number of the CPU receiving it modulo the socket count.
//
// Why: by default the kernel picks the socket by a hash of the four-tuple,
// so a handful of clients can land all on one socket (four dnsperf
// sockets on two server sockets fall 2:2, 3:1 or 4:0) and one reader
// answers most of the load while the other idles. Steering by CPU spreads
// any mix of clients evenly, and keeps a query on the CPU whose softirq
// received it (on a real NIC, RSS already spreads flows over CPUs). It is
// the classic program of Linux's reuseport tests (SKF_AD_CPU, then
// modulo); x/net/bpf could assemble it, but three instructions read
// plainer than a dependency. Kernels before 4.5 lack the option: the
// caller logs the error and the group keeps hashing.
func steerByCPU(c *net.UDPConn, sockets int) error {
	const skfAdCPU = 0xfffff000 + 36 // SKF_AD_OFF + SKF_AD_CPU (linux/filter.h)
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: skfAdCPU},
		{Code: unix.BPF_ALU | unix.BPF_MOD | unix.BPF_K, K: uint32(sockets)},
		{Code: unix.BPF_RET | unix.BPF_A},
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &fp)
	}); err != nil {
		return err
	}
	return serr
}
