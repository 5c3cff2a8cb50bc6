package dns

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// TestQueriesSteeredByCPU sends the same flow (one client socket) from two
// CPUs in turn: with the reuseport program each burst lands on the socket
// of its CPU; with flow hashing both would land on the same socket.
func TestQueriesSteeredByCPU(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	cpus := allowedCPUs(&set) // the k-th allowed CPU steers to socket k mod 2
	if len(cpus) < 2 {
		t.Skipf("needs two CPUs in this process's affinity mask (has %d): run on a machine with at least two cores", len(cpus))
	}
	cpuOf := [2]int{int(cpus[0]), int(cpus[1])}
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{UDPSockets: 2}}, pub, local)
	c, err := net.Dial("udp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := new(dns.Msg).SetQuestion("steer.test.", dns.TypeA)
	pkt, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	const burst = 50
	for want, cpu := range cpuOf {
		before := s.Stats().PerSocket
		done := make(chan error, 1)
		go func() {
			// Send from a thread that may only run on cpu: on loopback
			// the receiving softirq runs on the sender's CPU. The thread
			// stays locked, so it ends with this goroutine instead of
			// going back to the runtime with its narrowed mask.
			runtime.LockOSThread()
			var one unix.CPUSet
			one.Set(cpu)
			if err := unix.SchedSetaffinity(0, &one); err != nil {
				done <- err
				return
			}
			buf := make([]byte, 1500)
			for i := 0; i < burst; i++ {
				if _, err := c.Write(pkt); err != nil {
					done <- err
					return
				}
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				if _, err := c.Read(buf); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		after := s.Stats().PerSocket
		got := [2]int64{after[0] - before[0], after[1] - before[1]}
		if got[want] != burst || got[1-want] != 0 {
			t.Fatalf("%d queries sent from CPU %d landed %v on the two sockets; want all on socket %d", burst, cpu, got, want)
		}
	}
}

// TestSteerProgram runs the program on a small classic-BPF interpreter
// (the instructions it uses): a cpuset of {0, 2} spreads over both
// sockets, and CPUs outside it fall to their number modulo the sockets.
func TestSteerProgram(t *testing.T) {
	prog := steerProgram([]uint32{0, 2}, 2)
	for cpu, want := range map[uint32]uint32{0: 0, 2: 1, 1: 1, 3: 1, 4: 0} {
		if got := runSteer(t, prog, cpu); got != want {
			t.Errorf("CPU %d → socket %d, want %d", cpu, got, want)
		}
	}
	prog = steerProgram([]uint32{0, 1, 2, 3}, 3)
	for cpu, want := range map[uint32]uint32{0: 0, 1: 1, 2: 2, 3: 0, 7: 1} {
		if got := runSteer(t, prog, cpu); got != want {
			t.Errorf("4 CPUs on 3 sockets: CPU %d → socket %d, want %d", cpu, got, want)
		}
	}
}

func runSteer(t *testing.T, prog []unix.SockFilter, cpu uint32) uint32 {
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if in.K != 0xfffff000+36 {
				t.Fatalf("load of %#x, not the CPU", in.K)
			}
			a = cpu
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			if a == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_ALU | unix.BPF_MOD | unix.BPF_K:
			a %= in.K
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		case unix.BPF_RET | unix.BPF_A:
			return a
		default:
			t.Fatalf("instruction %d: code %#x", pc, in.Code)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}
