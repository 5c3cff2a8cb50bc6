package tunnel

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
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

// A peer that announces another server's id (learnt from announcements
// or a claim) and accepts the client's open without holding the key
// does not get the client's traffic: the client checks the server's
// proof, skips the impostor and reaches the real server. The impostor's
// peer id sorts first, so without the check every connection went to it.
func TestImpostorProviderGetsNoTraffic(t *testing.T) {
	for _, secure := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "secure"}[secure]
		t.Run(name, func(t *testing.T) {
			testutil.NoLeaks(t)
			tn := newTestNet(t, true)
			a, b := tn.node(nil), tn.node(nil)
			connect(t, a, b)
			opts := targetOpts(echoServer(t))
			opts.Secure = secure
			_, url := a.createServer(opts)
			var opened atomic.Int64
			impostor(t, tn, a, b, func(_ transport.Conn, s transport.Stream) {
				defer s.Close()
				_ = s.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := readOpen(s); err != nil {
					return
				}
				opened.Add(1)
				// Accept with a made-up proof, then answer as the service.
				if writeFrame(s, &messages.TunnelOpenReply{Proof: bytes.Repeat([]byte{1}, 64)}) != nil {
					return
				}
				buf := make([]byte, 64)
				n, _ := s.Read(buf)
				_, _ = s.Write(bytes.Repeat([]byte("X"), n))
			})

			b.own("victim.p2p")
			_, addr := b.createClient("victim.p2p", url)
			for i := range 3 {
				if err := dialEcho(addr, []byte("to the real server")); err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
			}
			if opened.Load() == 0 {
				t.Fatal("the client never tried the impostor: the test proves nothing")
			}
		})
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

	var injected atomic.Int64
	impostor(t, tn, a, b, func(c transport.Conn, s transport.Stream) {
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

// impostor joins b's mesh as a peer whose id sorts before a's, so b
// tries it first among the providers, announces what a announces
// (without its keys), and serves the streams it is opened with handle.
func impostor(t *testing.T, tn *testNet, a, b *testNode, handle func(transport.Conn, transport.Stream)) {
	t.Helper()
	announced := a.mesh.Announced()
	if len(announced) != 1 {
		t.Fatalf("announced %v", announced)
	}
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
	evil.HandleStreams(handle)
	evil.Announce(announced)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tunneltest.Connect(ctx, b.mesh, evil); err != nil {
		t.Fatal(err)
	}
	if p := b.mesh.Providers(announced[0]); len(p) != 2 || p[0] != id.ID() {
		t.Fatalf("providers %v, want the impostor first", p)
	}
}

// A peer that announces a server's id and then says nothing holds each
// open it gets until the handshake timeout. Once the real server proved
// the id, it is tried first: the silent impostor delays the first
// connection (or flow) of a client, not every one.
func TestSilentImpostorDelaysOnlyTheFirstOpen(t *testing.T) {
	for _, udp := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp", true: "udp"}[udp], func(t *testing.T) {
			testutil.NoLeaks(t)
			tn := newTestNet(t, true)
			a := tn.node(nil)
			b := tn.node(func(d *Deps) { d.HandshakeTimeout = 500 * time.Millisecond })
			connect(t, a, b)
			o := targetOpts(echoServer(t))
			if udp {
				o = targetOpts(udpEcho(t))
				o.UDP = true
			}
			_, url := a.createServer(o)
			var opened atomic.Int64
			impostor(t, tn, a, b, func(_ transport.Conn, s transport.Stream) {
				defer s.Abort()
				_ = s.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := readOpen(s); err != nil {
					return
				}
				opened.Add(1)
				_, _ = io.Copy(io.Discard, s) // silent until the client gives up
			})
			b.own("silent.p2p")
			const opens = 4
			if udp {
				_, addr := b.createUDPClient("silent.p2p", url)
				for i := range opens { // a flow per socket
					udpAsk(t, udpSocket(t, addr), fmt.Sprint("flow ", i))
				}
			} else {
				_, addr := b.createClient("silent.p2p", url)
				for i := range opens {
					if err := dialEcho(addr, []byte("to the real server")); err != nil {
						t.Fatalf("connection %d: %v", i, err)
					}
				}
			}
			if got := opened.Load(); got != 1 {
				t.Fatalf("the impostor held %d of %d opens, want the first only", got, opens)
			}
		})
	}
}
