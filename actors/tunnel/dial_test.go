package tunnel

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// The Dialer reaches a peer's server over a stream and a local server
// directly, with half-close both ways, counts local connections in the
// server's counters, and refuses bad URLs and a stopped supervisor.
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
		got, err := io.ReadAll(bufio.NewReader(c))
		if err != nil || string(got) != "hello "+name {
			t.Fatalf("%s: echo %q, %v", name, got, err)
		}
		c.Close()
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		s := a.server(sid).Info
		if s.ConnectionsTotal != 2 || s.ConnectionsOpen != 0 || s.BytesIn != int64(len("hello peer")+len("hello local")) {
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
