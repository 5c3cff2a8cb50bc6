package tunnel

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// outOfFilesChild, set in the environment, runs the test's body in a
// process of its own: it lowers RLIMIT_NOFILE, which the go test process
// running the other tests must keep.
const outOfFilesChild = "PEERDNS_TUNNEL_OUT_OF_FILES_CHILD"

// An Accept that fails because the process is out of descriptors leaves
// the client's listener as it is: the connection queued on it is
// accepted and carried once descriptors are free again, not reset by a
// close and bind of the listener.
func TestClientAcceptOutOfFiles(t *testing.T) {
	if os.Getenv(outOfFilesChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestClientAcceptOutOfFiles$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), outOfFilesChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestClientAcceptOutOfFiles") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	n := newTestNet(t, false).node(nil)
	_, url := n.createServer(targetOpts(echoServer(t)))
	n.own("files.p2p")
	_, addr := n.createClient("files.p2p", url)
	ap, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	// The dialing socket is made while descriptors are left; its connect
	// takes none.
	s, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	dial := os.NewFile(uintptr(s), "dial")
	defer dial.Close()

	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = min(lim.Cur, uint64(len(open)+64))
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var fill []int
	release := func() {
		for _, fd := range fill {
			_ = syscall.Close(fd)
		}
		fill = nil
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	defer release()
	for {
		fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if errors.Is(err, syscall.EMFILE) {
			break
		}
		if err != nil || len(fill) > 1<<16 {
			t.Fatalf("filling the descriptor table: %v (%d open)", err, len(fill))
		}
		fill = append(fill, fd)
	}
	var sa syscall.SockaddrInet4
	copy(sa.Addr[:], ap.IP.To4())
	sa.Port = ap.Port
	if err := syscall.Connect(s, &sa); err != nil {
		t.Fatal(err)
	}
	// The client's Accept runs into EMFILE.
	testutil.Eventually(t, 5*time.Second, func() error {
		if !strings.Contains(n.log.String(), "too many open files") {
			return errors.New("the client's accept has not failed yet")
		}
		return nil
	})
	release()
	c, err := net.FileConn(dial)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := dialEchoConn(c, []byte("queued while out of files")); err != nil {
		t.Fatalf("the connection queued while the process was out of files: %v", err)
	}
}

// A client whose listener died and whose port is taken meanwhile stays
// in error while it binds again: the lookup, which still finds the
// server, does not set it running between two binds (a hint each time,
// and the bind's error logged again after each), and once bound again
// it is running at once.
func TestClientRebindKeepsErrorState(t *testing.T) {
	testutil.NoLeaks(t)
	var recheck time.Duration
	n := newTestNet(t, false).node(func(d *Deps) { recheck = d.Recheck })
	_, url := n.createServer(targetOpts(echoServer(t)))
	n.own("rebind.p2p")
	id, addr := n.createClient("rebind.p2p", url)
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	lfd := listenerFD(t, port)
	// The test keeps the listening socket (the port stays taken) and
	// puts /dev/null in the client's place: the next Accept fails.
	keep, err := syscall.Dup(lfd)
	if err != nil {
		t.Fatal(err)
	}
	kept := true
	closeKeep := func() {
		if kept {
			kept = false
			_ = syscall.Close(keep)
		}
	}
	defer closeKeep()
	null, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup3(null, lfd, syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Close(null)
	c, err := net.Dial("tcp", addr) // wakes the Accept
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testutil.Eventually(t, 5*time.Second, func() error {
		if info := n.client(id).Info; info.State != messages.TunnelError {
			return fmt.Errorf("state %q (%s)", info.State, info.Error)
		}
		return nil
	})
	var hints atomic.Int64
	sub := n.sys.EventStream.Subscribe(func(ev any) {
		if h, ok := ev.(*messages.Hint); ok && h.Type == messages.HintTunnelClients {
			hints.Add(1)
		}
	})
	defer n.sys.EventStream.Unsubscribe(sub)
	// Twenty lookup periods with the port taken: the state stays.
	for end := time.Now().Add(20 * recheck); time.Now().Before(end); {
		if info := n.client(id).Info; info.State != messages.TunnelError {
			t.Fatalf("state %q (%s) while the port is taken", info.State, info.Error)
		}
	}
	if h := hints.Load(); h != 0 {
		t.Errorf("%d update-tunnel-clients hints while the client kept failing to bind", h)
	}
	if lines := strings.Count(n.log.String(), "tunnel client cannot listen"); lines != 1 {
		t.Errorf("the bind's error was logged %d times; want once", lines)
	}
	closeKeep()
	n.waitClient(id, messages.TunnelRunning)
	if err := dialEcho(addr, []byte("bound again")); err != nil {
		t.Fatal(err)
	}
}

// listenerFD is the descriptor of this process's TCP socket listening
// on port.
func listenerFD(t *testing.T, port int) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fds {
		fd, err := strconv.Atoi(f.Name())
		if err != nil {
			continue
		}
		if l, _ := os.Readlink(filepath.Join("/proc/self/fd", f.Name())); !strings.HasPrefix(l, "socket:") {
			continue
		}
		sa, err := syscall.Getsockname(fd)
		if in4, ok := sa.(*syscall.SockaddrInet4); err != nil || !ok || in4.Port != port {
			continue
		}
		if on, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN); err == nil && on == 1 {
			return fd
		}
	}
	t.Fatalf("no listening socket on port %d", port)
	return -1
}
