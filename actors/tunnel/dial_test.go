package tunnel

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// countedRead reads r and tells count what it read.
type countedRead struct {
	r     io.Reader
	count func(int64)
}

func (c countedRead) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.count(int64(n))
	return n, err
}

// The Dialer reaches a peer's server over a stream and a local server
// directly (its socket handed out for splicing, what is read from it
// past Read counted when told), with half-close both ways, counts local
// connections and their bytes in the server's counters, and refuses bad
// URLs and a stopped supervisor.
func TestDialer(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, true)
	da, db := &Dialer{}, &Dialer{}
	a := tn.node(func(d *Deps) { d.Dialer = da })
	b := tn.node(func(d *Deps) { d.Dialer = db })
	connect(t, a, b)
	sid, url := a.createServer(targetOpts(echoServer(t)))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, d := range map[string]*Dialer{"peer": db, "local": da} {
		var c net.Conn
		testutil.Eventually(t, 5*time.Second, func() (err error) {
			c, err = d.Dial(ctx, url)
			return err
		})
		if _, err := fmt.Fprint(c, "hello "+name); err != nil {
			t.Fatal(err)
		}
		if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
			t.Fatalf("%s: CloseWrite: %v", name, err)
		}
		var r io.Reader = bufio.NewReader(c)
		if ts, ok := c.(interface {
			TCPConn() *net.TCPConn
			CountRead(int64)
		}); ok {
			// Read from the socket past Read, as the edge's splice does:
			// told, the server's counters count it all the same.
			r = countedRead{ts.TCPConn(), ts.CountRead}
		} else if name == "local" {
			t.Fatalf("a local connection (%T) does not hand out its socket", c)
		}
		got, err := io.ReadAll(r)
		if err != nil || string(got) != "hello "+name {
			t.Fatalf("%s: echo %q, %v", name, got, err)
		}
		c.Close()
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		s := a.server(sid).Info
		if n := int64(len("hello peer") + len("hello local")); s.ConnectionsTotal != 2 || s.ConnectionsOpen != 0 || s.BytesIn != n || s.BytesOut != n {
			return fmt.Errorf("server counters %+v", s.TunnelCounters)
		}
		return nil
	})

	if _, err := db.Dial(ctx, "hs://nothex"); !errors.Is(err, messages.ErrBadTunnel) {
		t.Fatalf("bad url: %v", err)
	}
	if _, err := db.Dial(ctx, "hs://"+fmt.Sprintf("%064x", 7)); !errors.Is(err, errNoServer) {
		t.Fatalf("unknown key: %v", err)
	}
	b.stop()
	if _, err := db.Dial(ctx, url); !errors.Is(err, ErrTunnelsStopped) {
		t.Fatalf("stopped: %v", err)
	}
}

// peerDialer is two connected nodes over QUIC and a Dialer on the
// second: a's servers are reached over a peer stream. dial connects to
// url through it, waiting for the server to be known.
func peerDialer(t *testing.T) (a *testNode, dial func(url string) net.Conn) {
	t.Helper()
	tn := newTestNet(t, true)
	a = tn.node(nil)
	db := &Dialer{}
	b := tn.node(func(d *Deps) { d.Dialer = db })
	connect(t, a, b)
	return a, func(url string) net.Conn {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var c net.Conn
		testutil.Eventually(t, 5*time.Second, func() (err error) {
			c, err = db.Dial(ctx, url)
			return err
		})
		return c
	}
}

// A peer stream read into large buffers (the edge copying a body)
// gathers what arrives close together, and gathering changes nothing a
// reader can see: every byte in order, io.EOF at the end, a body that
// pauses longer than the gathering wait still comes piece by piece, and
// the read deadline the user set (one that falls due while a read
// waits, a moving one, one in the past set from another goroutine to
// halt the reader) is the one in force after.
func TestDialerGathersReads(t *testing.T) {
	testutil.NoLeaks(t)
	a, dialURL := peerDialer(t)
	body := make([]byte, 1<<20)
	for i := range body {
		body[i] = byte(i * 7)
	}
	hold := make(chan struct{})
	_, url := a.createServer(targetOpts(tcpServer(t, func(c net.Conn) {
		var cmd [1]byte
		if _, err := io.ReadFull(c, cmd[:]); err != nil {
			return
		}
		switch cmd[0] {
		case 'b': // bulk, in 1 KiB writes
			for i := 0; i < len(body); i += 1 << 10 {
				if _, err := c.Write(body[i : i+1<<10]); err != nil {
					return
				}
			}
		case 'p': // 8 KiB, then nothing until released, then 8 KiB
			_, _ = c.Write(body[:8<<10])
			<-hold
			_, _ = c.Write(body[8<<10 : 16<<10])
		}
		_ = c.(*net.TCPConn).CloseWrite()
	})))
	dial := func(cmd string) net.Conn {
		c := dialURL(url)
		if _, err := io.WriteString(c, cmd); err != nil {
			t.Fatal(err)
		}
		return c
	}

	c := dial("b")
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 0, len(body))
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
	}
	if string(got) != string(body) {
		t.Fatalf("bulk body: %d bytes, differs from the %d sent", len(got), len(body))
	}
	c.Close()

	// A pause longer than the gathering wait: the first part comes
	// alone; a halt (a deadline in the past) while the reader waits ends
	// the read, and gathering does not undo it.
	c = dial("p")
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := io.ReadAtLeast(c, buf, 8<<10)
	if err != nil || string(buf[:n]) != string(body[:8<<10]) {
		t.Fatalf("before the pause: %d bytes, %v", n, err)
	}
	// A deadline that falls due while the reader waits fails the read;
	// one moved away again lets reads wait anew.
	if err := c.SetReadDeadline(time.Now().Add(30 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v, want a deadline error", err)
	}
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(buf)
		done <- err
	}()
	time.AfterFunc(20*time.Millisecond, func() { _ = c.SetReadDeadline(time.Unix(1, 0)) })
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("halted read: %v, want a deadline error", err)
	}
	close(hold)
	testutil.Eventually(t, 5*time.Second, func() error {
		// The server wrote the rest; the halt still holds.
		if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("read after halt: %v", err)
		}
		return nil
	})
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(c)
	if err != nil || string(rest) != string(body[8<<10:16<<10]) {
		t.Fatalf("after the pause: %d bytes, %v", len(rest), err)
	}
	c.Close()
}

// A peer's stream the edge holds idle is looked into (IdleSpoke) without
// waiting and without taking anything, the read deadline the user set
// (or none) still in force after the look; once the server's target
// ended its side, the look sees it.
func TestDialerIdleSpoke(t *testing.T) {
	testutil.NoLeaks(t)
	a, dial := peerDialer(t)
	_, url := a.createServer(targetOpts(echoServer(t)))
	c := dial(url)
	defer c.Close()
	look := c.(interface{ IdleSpoke() bool })
	echo := func(s string) {
		t.Helper()
		if _, err := io.WriteString(c, s); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(s))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != s {
			t.Fatalf("echo %q: %q, %v", s, got, err)
		}
	}
	echo("first")
	if look.IdleSpoke() {
		t.Fatal("a quiet stream looked spoken")
	}
	echo("after a look") // no deadline left behind, nothing taken

	deadline := time.Now().Add(300 * time.Millisecond)
	if err := c.SetReadDeadline(deadline); err != nil {
		t.Fatal(err)
	}
	if look.IdleSpoke() {
		t.Fatal("a quiet stream looked spoken")
	}
	var b1 [1]byte
	if _, err := c.Read(b1[:]); !isTimeout(err) || time.Now().Before(deadline) {
		t.Fatalf("read under the user's deadline after a look: %v, %v before it", err, time.Until(deadline))
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	echo("deadline lifted")

	// The echo server half-closes once it has our end.
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if !look.IdleSpoke() {
			return errors.New("the server's end not seen")
		}
		return nil
	})
}
