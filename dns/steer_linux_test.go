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
	cpuOf := [2]int{-1, -1} // an even and an odd CPU this process may use
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) && cpuOf[c%2] < 0 {
			cpuOf[c%2] = c
		}
	}
	if cpuOf[0] < 0 || cpuOf[1] < 0 {
		t.Skipf("needs an even and an odd CPU in this process's affinity mask (has %d CPUs): run on a machine with at least two cores", set.Count())
	}
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
