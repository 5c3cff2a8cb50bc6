package cli

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// freezer relays TCP connections to a node until frozen; from then on
// it passes no byte either way and closes nothing: a node whose host
// stopped (SIGSTOP, a suspended VM) or whose network went away.
type freezer struct {
	once   sync.Once
	frozen chan struct{}
}

func (f *freezer) freeze() { f.once.Do(func() { close(f.frozen) }) }

// relay starts the relay to addr and returns its address.
func (f *freezer) relay(t *testing.T, addr string) string {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case <-f.frozen:
					<-stop // held until the test ends
					return
				default:
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	a := testutil.ServeTCP(t, func(c net.Conn) {
		up, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		defer up.Close()
		done := make(chan struct{}, 2)
		go func() { pipe(up, c); done <- struct{}{} }()
		go func() { pipe(c, up); done <- struct{}{} }()
		<-done
	})
	return a.String()
}

// `logs -f` whose node stops answering after the history was printed
// exits 1 with one line within about --timeout, instead of waiting
// forever for lines that cannot come.
func TestLogsFollowNodeStopsAnswering(t *testing.T) {
	n := startNode(t)
	f := &freezer{frozen: make(chan struct{})}
	addr := f.relay(t, n.AdminAddr())

	var out, errOut testutil.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(context.Background(), "logs", []string{"-f", "core", "--lines", "1", "--timeout", "1s"},
			func(string) string { return addr }, &out, &errOut)
	}()
	testutil.Eventually(t, 10*time.Second, func() error {
		if strings.Count(out.String(), "\n") < 1 {
			return fmt.Errorf("no history line yet")
		}
		return nil
	})
	f.freeze()
	select {
	case code := <-done:
		if code != ExitNoNode || strings.Count(errOut.String(), "\n") != 1 || !strings.Contains(errOut.String(), "stopped answering") {
			t.Fatalf("logs -f of a node that stopped answering: exit %d, stderr %q; want exit 1 and one line", code, errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("logs -f still waits 15 s after its node stopped answering (--timeout 1s)")
	}
}

// An interrupt (ctx, which the binary ends on SIGINT and SIGTERM) while
// a command waits for a node that accepted the connection and answers
// nothing ends the command at once, not after --timeout: with exit 130,
// or 0 for `logs -f`, which always ends so.
func TestInterruptWhileWaiting(t *testing.T) {
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	for _, args := range [][]string{{"status"}, {"domains", "add", "x.p2p", hashA}, {"logs", "-f"}, {"metrics"}} {
		// A listener each: a connection dialled for a command that was
		// interrupted may wait in net/http's pool for the next one.
		accepted := make(chan struct{}, 16)
		addr := testutil.ServeTCP(t, func(c net.Conn) {
			accepted <- struct{}{}
			<-hold
		}).String()
		ctx, cancel := context.WithCancel(context.Background())
		var out, errOut testutil.LogBuffer
		done := make(chan int, 1)
		go func() {
			done <- Run(ctx, args[0], append(args[1:], "--timeout", "1m"), func(string) string { return addr }, &out, &errOut)
		}()
		<-accepted
		cancel()
		select {
		case code := <-done:
			want, lines := ExitInterrupted, 1
			if args[0] == "logs" {
				want, lines = ExitOK, 0
			}
			if code != want || out.String() != "" || strings.Count(errOut.String(), "\n") != lines {
				t.Errorf("peerdns %s interrupted: exit %d, stdout %q, stderr %q; want exit %d and %d lines", strings.Join(args, " "), code, out.String(), errOut.String(), want, lines)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("peerdns %s still waits 10 s after it was interrupted (--timeout 1m)", strings.Join(args, " "))
		}
	}
}
