package tunnel

import (
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// A tunnel connection whose local side reads nothing, so that the copy
// toward it waits in a write, ends when the peer connection under its
// stream closes: the connection is no longer counted open and the
// local side sees the end, on the server's node (a
// service that reads nothing while the client uploads) and on the
// client's node (a client that reads nothing while the service
// streams), in memory and over QUIC.
func TestPeerGoneEndsStalledConnection(t *testing.T) {
	for _, mode := range []string{"mem", "quic"} {
		for _, stalled := range []string{"server", "client"} {
			t.Run(mode+"/"+stalled, func(t *testing.T) {
				testutil.NoLeaks(t)
				tn := newTestNet(t, mode == "quic")
				a, b := tn.node(nil), tn.node(nil)
				connect(t, a, b)
				release := make(chan struct{})
				defer close(release)
				held := make(chan net.Conn, 1)
				var written atomic.Int64
				target := tcpServer(t, func(c net.Conn) {
					if stalled == "server" { // reads nothing, says nothing
						_ = c.(*net.TCPConn).SetReadBuffer(64 << 10)
						held <- c
						<-release
						return
					}
					writeOn(c, &written)
				})
				sid, url := a.createServer(targetOpts(target))
				b.own("gone.p2p")
				cid, addr := b.createClient("gone.p2p", url)
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				if stalled == "server" {
					go writeOn(conn, &written)
					waitStalled(t, &written, "client", "a service that reads nothing")
				} else {
					_ = conn.(*net.TCPConn).SetReadBuffer(64 << 10)
					waitStalled(t, &written, "service", "a client that reads nothing")
				}

				b.mesh.Disconnect(a.id.ID())

				open := func() int64 {
					if stalled == "server" {
						return a.server(sid).Info.ConnectionsOpen
					}
					return b.client(cid).Info.ConnectionsOpen
				}
				testutil.Eventually(t, 10*time.Second, func() error {
					if n := open(); n != 0 {
						return fmt.Errorf("%d connections open on the %s's node after its peer went away", n, stalled)
					}
					return nil
				})
				// The stalled local side sees the end (what was on the way,
				// then the reset), not a connection that stays open.
				local := conn
				if stalled == "server" {
					local = <-held
				}
				_ = local.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.Copy(io.Discard, local); isTimeout(err) {
					t.Fatalf("the %s's local connection was not ended", stalled)
				}
			})
		}
	}
}
