package tunnel

import (
	"bytes"
	"context"
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
			announced := a.mesh.Announced()
			if len(announced) != 1 {
				t.Fatalf("announced %v", announced)
			}

			// The impostor: a peer of b whose id sorts before a's.
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
			var opened atomic.Int64
			evil.HandleStreams(func(_ transport.Conn, s transport.Stream) {
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
			evil.Announce(announced)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tunneltest.Connect(ctx, b.mesh, evil); err != nil {
				t.Fatal(err)
			}
			if p := b.mesh.Providers(announced[0]); len(p) != 2 || p[0] != id.ID() {
				t.Fatalf("providers %v, want the impostor first", p)
			}

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
