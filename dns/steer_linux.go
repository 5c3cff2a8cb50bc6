package dns

import (
	"net"

	"golang.org/x/sys/unix"
)

// steerByCPU attaches a classic BPF program to the SO_REUSEPORT group of
// the server's UDP sockets that picks, for each datagram, a socket by the
// CPU receiving it: the k-th CPU this process may run on gets socket
// k mod sockets, any other CPU (one outside a container's cpuset that
// takes the NIC's interrupts) its number mod sockets.
//
// Why: by default the kernel picks the socket by a hash of the four-tuple,
// so a handful of clients can land all on one socket (four dnsperf
// sockets on two server sockets fall 2:2, 3:1 or 4:0) and one reader
// answers most of the load while the other idles. Steering by CPU spreads
// any mix of clients evenly, and keeps a query on the CPU whose softirq
// received it (on a real NIC, RSS already spreads flows over CPUs). The
// program is the classic one of Linux's reuseport tests (SKF_AD_CPU),
// with a lookup first so a cpuset such as {0,2} does not put everything
// on socket 0; x/net/bpf could assemble it, but a few instructions in a
// loop read plainer than a dependency. Kernels before 4.5 lack the
// option: the caller logs the error and the group keeps hashing.
func steerByCPU(c *net.UDPConn, sockets int) error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return err
	}
	prog := steerProgram(allowedCPUs(&set), sockets)
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

// maxSteered bounds the lookup (two instructions a CPU; classic BPF
// allows 4,096): CPUs past it fall to the modulo.
const maxSteered = 1024

func allowedCPUs(set *unix.CPUSet) []uint32 {
	var cpus []uint32
	for c := 0; c < len(set)*64 && len(cpus) < maxSteered; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, uint32(c))
		}
	}
	return cpus
}

// steerProgram: A = CPU; for each allowed CPU, if A is it return its
// slot; else return A mod sockets.
func steerProgram(cpus []uint32, sockets int) []unix.SockFilter {
	const skfAdCPU = 0xfffff000 + 36 // SKF_AD_OFF + SKF_AD_CPU (linux/filter.h)
	prog := []unix.SockFilter{{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: skfAdCPU}}
	for k, c := range cpus {
		prog = append(prog,
			unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: c},
			unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: uint32(k % sockets)})
	}
	return append(prog,
		unix.SockFilter{Code: unix.BPF_ALU | unix.BPF_MOD | unix.BPF_K, K: uint32(sockets)},
		unix.SockFilter{Code: unix.BPF_RET | unix.BPF_A})
}
