package tunnel

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/actors/tunnel/tunneltest"
	"peerdns/internal/testutil"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
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
					buf := make([]byte, 64<<10)
					for {
						n, err := c.Write(buf)
						written.Add(int64(n))
						if err != nil {
							return
						}
					}
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
					go func() {
						buf := make([]byte, 64<<10)
						for {
							n, err := conn.Write(buf)
							written.Add(int64(n))
							if err != nil {
								return
							}
						}
					}()
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

// A peer that announces a UDP server's id without holding its key, and
// sorts first among the providers, learns the flow id of a client's
// flow from its open: the datagrams it sends with that id while it holds
// the handshake never reach the client socket, which gets the real
// service's answers only.
func TestUDPImpostorInjectsNothing(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, true)
	a := tn.node(nil)
	b := tn.node(func(d *Deps) { d.HandshakeTimeout = 500 * time.Millisecond })
	connect(t, a, b)
	o := targetOpts(udpEcho(t))
	o.UDP = true
	_, url := a.createServer(o)
	announced := a.mesh.Announced()

	var id *identity.Identity
	for id == nil || id.ID() >= a.id.ID() {
		var err error
		if id, err = identity.Generate(); err != nil {
			t.Fatal(err)
		}
	}
	ep, err := transport.Listen(transport.Config{Identity: id, ListenAddr: "127.0.0.1:0", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	evil := tn.mesh.Add(t, ep)
	var injected atomic.Int64
	evil.HandleStreams(func(c transport.Conn, s transport.Stream) {
		defer s.Abort()
		_ = s.SetDeadline(time.Now().Add(5 * time.Second))
		open, err := readOpen(s)
		if err != nil || open.Flow == 0 {
			return
		}
		ended := make(chan struct{})
		go func() { defer close(ended); _, _ = io.Copy(io.Discard, s) }()
		pkt := binary.BigEndian.AppendUint64(nil, open.Flow)
		pkt = append(pkt, "evil|injected"...)
		for {
			if c.SendDatagram(pkt) == nil {
				injected.Add(1)
			}
			select {
			case <-ended: // the client gave up on the handshake
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	evil.Announce(announced)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tunneltest.Connect(ctx, b.mesh, evil); err != nil {
		t.Fatal(err)
	}
	if p := b.mesh.Providers(announced[0]); len(p) != 2 || p[0] != id.ID() {
		t.Fatalf("providers %v, want the impostor first", p)
	}

	b.own("uimp.p2p")
	_, addr := b.createUDPClient("uimp.p2p", url)
	c := udpSocket(t, addr)
	buf := make([]byte, 4096)
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, err := c.Write([]byte("legit")); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for {
			n, err := c.Read(buf)
			if err != nil {
				return fmt.Errorf("no answer: %w", err)
			}
			if strings.HasPrefix(string(buf[:n]), "evil") {
				t.Fatalf("the client socket got the impostor's datagram %q", buf[:n])
			}
			if strings.HasPrefix(string(buf[:n]), "legit|") {
				return nil
			}
		}
	})
	if injected.Load() == 0 {
		t.Fatal("the impostor sent nothing: the test proves nothing")
	}
}

// A client socket that keeps sending, more often than the idle timeout,
// through a server that restarts (which forgets its flows while the peer
// connection stays up) gets answers again at once: the server answers
// the forgotten flow's datagrams with an unknown-flow datagram, the
// client ends that flow and the socket's next datagram registers a new
// one. It used to wait for an idle timeout that never came.
func TestUDPServerRestartBusyClient(t *testing.T) {
	testutil.NoLeaks(t)
	tn := newTestNet(t, true)
	a, b := tn.node(nil), tn.node(nil) // the default idle timeout: 60 s
	connect(t, a, b)
	sid, cid, addr := udpTunnel(t, a, b, "urst.p2p")
	c := udpSocket(t, addr)
	first := udpAsk(t, c, "hello")
	if r := ask[*messages.TunnelWriteReply](t, a, &messages.RestartTunnelServer{ID: sid}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if again := udpAsk(t, c, "after the restart"); again == first {
		t.Fatalf("the service saw the old flow's source %s after the restart", first)
	}
	if tot := b.client(cid).Info.ConnectionsTotal; tot != 2 {
		t.Fatalf("client flows total %d, want 2", tot)
	}
}
