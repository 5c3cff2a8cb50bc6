package tunnel

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"peerdns/internal/testutil"
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
