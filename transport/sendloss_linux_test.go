package transport

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"peerdns/transport/identity"
)

// The wrapper keeps quic-go's Linux optimisations: on loopback a bulk
// stream goes out in GSO batches (a UDP_SEGMENT control message) with ECN
// marks (IP_TOS), both passed through lossyConn.WriteMsgUDP.
func TestLossyConnKeepsGSOAndECN(t *testing.T) {
	a, _ := newTestEndpoint(t)
	b, _ := newTestEndpoint(t)
	var gso, ecn, writes atomic.Int64
	b.lossy.onWrite = func(_, oob []byte) {
		writes.Add(1)
		msgs, err := syscall.ParseSocketControlMessage(oob)
		if err != nil {
			return
		}
		for _, m := range msgs {
			switch {
			case m.Header.Level == syscall.IPPROTO_UDP && m.Header.Type == 103: // SOL_UDP, UDP_SEGMENT
				gso.Add(1)
			case m.Header.Level == syscall.IPPROTO_IP && m.Header.Type == syscall.IP_TOS:
				ecn.Add(1)
			}
		}
	}
	in, out := connect(t, a, b)
	st, err := out.OpenStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int64, 1)
	go func() {
		rs, err := in.AcceptStream(ctxT(t))
		if err != nil {
			done <- -1
			return
		}
		n, _ := io.Copy(io.Discard, rs)
		done <- n
	}()
	buf := make([]byte, 64<<10)
	const total = 8 << 20
	for sent := 0; sent < total; sent += len(buf) {
		if _, err := st.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	st.CloseWrite()
	if n := <-done; n != total {
		t.Fatalf("received %d of %d bytes", n, total)
	}
	t.Logf("%d writes, %d with UDP_SEGMENT (GSO), %d with IP_TOS (ECN)", writes.Load(), gso.Load(), ecn.Load())
	if gso.Load() == 0 {
		t.Error("no GSO batch went through the wrapper: quic-go lost its GSO capability")
	}
	if ecn.Load() == 0 {
		t.Error("no ECN mark went through the wrapper: quic-go lost its ECN capability")
	}
}

func TestIsTransientSendErr(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{os.NewSyscallError("sendmsg", syscall.EPERM), true},
		{os.NewSyscallError("sendmsg", syscall.ENOBUFS), true},
		{os.NewSyscallError("sendmsg", syscall.ENETUNREACH), true},
		{os.NewSyscallError("sendmsg", syscall.EHOSTUNREACH), true},
		{os.NewSyscallError("sendmsg", syscall.EMSGSIZE), false}, // path MTU discovery needs it
		{os.NewSyscallError("sendmsg", syscall.EIO), false},      // GSO fallback needs it
		{os.NewSyscallError("sendmsg", syscall.EBADF), false},
		{io.EOF, false},
		{nil, false},
	} {
		if got := IsTransientSendErr(c.err); got != c.want {
			t.Errorf("IsTransientSendErr(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// Two endpoints in network namespaces of their own (pft-…, 192.0.2.0/24
// on a veth pair, no route out) whose hosts each drop 2% of their
// outgoing UDP in nftables' output hook, so sendmsg fails with EPERM for
// those datagrams: the connection stays up and a stream carries bytes
// through it for three seconds. Each side runs as this test binary in its
// namespace (TestSendLossHelper).
func TestHostOutputDropKeepsConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: network namespaces and a 3 s transfer")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to make network namespaces (run as root with iproute2 and nftables)")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (apt-get install iproute2 nftables)", tool)
		}
	}
	pfx := fmt.Sprintf("pft-tr%d", os.Getpid()%100000)
	nsA, nsB := pfx+"a", pfx+"b"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", nsA).Run()
		_ = exec.Command("ip", "netns", "del", nsB).Run()
	})
	run("ip", "netns", "add", nsA)
	run("ip", "netns", "add", nsB)
	run("ip", "-n", nsA, "link", "add", "v0", "type", "veth", "peer", "name", "v0", "netns", nsB)
	for i, ns := range []string{nsA, nsB} {
		run("ip", "-n", ns, "addr", "add", fmt.Sprintf("192.0.2.%d/24", i+1), "dev", "v0")
		run("ip", "-n", ns, "link", "set", "v0", "up")
		run("ip", "-n", ns, "link", "set", "lo", "up")
		run("ip", "netns", "exec", ns, "nft", "add table inet pft; add chain inet pft out { type filter hook output priority 0; }; add rule inet pft out meta l4proto udp numgen random mod 100 < 2 counter drop")
	}

	helper := func(ns string, env ...string) (*exec.Cmd, *bufio.Scanner) {
		cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestSendLossHelper$", "-test.v")
		cmd.Env = append(os.Environ(), env...)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, bufio.NewScanner(out)
	}
	// field waits for a line "key value" from a helper.
	field := func(sc *bufio.Scanner, key string) string {
		t.Helper()
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), key+" "); ok {
				return v
			}
		}
		t.Fatalf("helper ended before printing %q", key)
		return ""
	}
	lcmd, lout := helper(nsA, "PFT_SENDLOSS=listen", "PFT_ADDR=192.0.2.1:7740")
	id := field(lout, "id")
	dcmd, dout := helper(nsB, "PFT_SENDLOSS=dial", "PFT_ADDR=192.0.2.1:7740", "PFT_PEER="+id, "PFT_SECONDS=3")
	got := field(dout, "result")
	lres := field(lout, "result")
	_ = dcmd.Wait()
	_ = lcmd.Wait()
	var bytes, dLost, lLost, qLost int64
	var alive string
	fmt.Sscanf(got, "bytes=%d lost=%d conn=%s quiclost=%d", &bytes, &dLost, &alive, &qLost)
	fmt.Sscanf(lres, "lost=%d", &lLost)
	t.Logf("3 s through 2%% output drops on both hosts: %d bytes (%.0f Mbit/s), sends refused and counted as lost: dialer %d, listener %d; connection %s",
		bytes, float64(bytes)*8/3/1e6, dLost, lLost, alive)
	if alive != "open" {
		t.Fatalf("the connection did not survive the output drops: %s", got)
	}
	if bytes < 1<<20 {
		t.Fatalf("only %d bytes went through", bytes)
	}
	if dLost == 0 {
		t.Fatal("no send was refused on the dialer: the nftables rule did not act")
	}
	// The connection's own counters (LinkStatser) saw the drops as loss.
	if qLost == 0 {
		t.Fatalf("the dialer's connection counted no packet lost through 2%% output drops: %s", got)
	}
	t.Logf("packets the dialer's connection declared lost: %d", qLost)
}

// TestSendLossHelper is one side of TestHostOutputDropKeepsConnection,
// run in its namespace; it does nothing when PFT_SENDLOSS is unset.
func TestSendLossHelper(t *testing.T) {
	mode := os.Getenv("PFT_SENDLOSS")
	if mode == "" {
		return
	}
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	listen := "192.0.2.2:0"
	if mode == "listen" {
		listen = os.Getenv("PFT_ADDR")
	}
	e, err := Listen(Config{Identity: id, ListenAddr: listen, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := ctxT(t)
	if mode == "listen" {
		fmt.Printf("id %s\n", e.ID())
		c, err := e.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.AcceptStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, s)
		if err != nil {
			t.Fatalf("after %d bytes: %v", n, err)
		}
		if err := binary.Write(s, binary.BigEndian, n); err != nil {
			t.Fatal(err)
		}
		s.Close()
		<-c.Done() // the dialer closes once it read the count
		fmt.Printf("result lost=%d\n", e.SendLosses())
		return
	}
	c, err := e.Dial(ctx, os.Getenv("PFT_ADDR"), os.Getenv("PFT_PEER"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var secs int
	fmt.Sscan(os.Getenv("PFT_SECONDS"), &secs)
	buf := make([]byte, 32<<10)
	until := time.Now().Add(time.Duration(secs) * time.Second)
	for time.Now().Before(until) {
		if _, err := s.Write(buf); err != nil {
			fmt.Printf("result bytes=0 lost=%d conn=closed(%v)\n", e.SendLosses(), err)
			return
		}
	}
	s.CloseWrite()
	var n int64
	if err := binary.Read(s, binary.BigEndian, &n); err != nil {
		fmt.Printf("result bytes=0 lost=%d conn=closed(%v)\n", e.SendLosses(), err)
		return
	}
	state := "open"
	if c.Err() != nil {
		state = "closed"
	}
	fmt.Printf("result bytes=%d lost=%d conn=%s quiclost=%d\n", n, e.SendLosses(), state, c.(LinkStatser).LinkStats().PacketsLost)
	c.Close("done")
}
