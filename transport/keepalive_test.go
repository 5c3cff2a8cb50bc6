package transport

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"peerdns/internal/testutil"
	"peerdns/transport/identity"
)

// slowUplinkProxy forwards TCP to target, the client's bytes at most
// bytesPerSec (a home uplink), the answers at once. The client's bytes
// queue up in the sockets before it, as they do in a router's queue.
func slowUplinkProxy(t *testing.T, target string, bytesPerSec int) string {
	return testutil.ServeTCP(t, func(c net.Conn) {
		u, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		t.Cleanup(func() { c.Close(); u.Close() })
		back := make(chan struct{})
		go func() { _, _ = io.Copy(c, u); c.Close(); close(back) }()
		lim := rate.NewLimiter(rate.Limit(bytesPerSec), 4<<10)
		buf := make([]byte, 4<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if lim.WaitN(context.Background(), n) != nil {
					break
				}
				if _, err := u.Write(buf[:n]); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		u.Close()
		<-back
	}).String()
}

// A stream path whose uplink is backed up by a bulk upload stays up
// while the bytes move: yamux's keep-alive closed the session when a
// ping's answer took longer than WriteTimeout, and the answer waits
// behind the data queued before it. Here WriteTimeout is 1 s and the
// uplink holds well over a second of data; the session must carry the
// whole upload and stay open.
func TestSlowUplinkUploadKeepsStreamPath(t *testing.T) {
	tune := func(c *Config) {
		c.KeepAlive = 50 * time.Millisecond
		c.WriteTimeout = time.Second
		c.IdleTimeout = 5 * time.Second
	}
	a := newMulti(t, Options{}, tune)
	checkLeaks(t)
	id, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Identity: id, ListenAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(&testutil.LogBuffer{}, nil))}
	tune(&cfg)
	b, err := ListenMulti(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })

	const rateBytes = 200 << 10
	proxy := slowUplinkProxy(t, a.TCPAddr().String(), rateBytes)
	out, err := b.DialTCP(ctxT(t), proxy, a.ID())
	if err != nil {
		t.Fatal(err)
	}
	in, err := a.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	in.Admit()
	payload := bytes.Repeat([]byte("upload! "), 3*rateBytes/8) // 3 s of uplink
	got := readOneStream(t, in)
	s, err := out.OpenStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for p := payload; len(p) > 0; { // in a tunnel's io.Copy chunks
		n := min(len(p), 32<<10)
		if _, err := s.Write(p[:n]); err != nil {
			t.Fatalf("write after %d of %d bytes: %v; connection: %v", len(payload)-len(p), len(payload), err, out.Err())
		}
		p = p[n:]
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, payload) {
			t.Fatalf("read %d of %d bytes; connection: %v / %v", len(b), len(payload), out.Err(), in.Err())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("upload never ended")
	}
	for _, c := range []Conn{out, in} {
		select {
		case <-c.Done():
			t.Fatalf("the connection closed during the upload: %v", c.Err())
		default:
		}
	}
}

// A stream path whose byte stream goes silent (a router that drops
// everything, a peer that vanished) is still found dead: both ends close
// once nothing came from the other for IdleTimeout.
func TestSilentStreamPathTimesOut(t *testing.T) {
	tune := func(c *Config) {
		c.KeepAlive = 50 * time.Millisecond
		c.IdleTimeout = 500 * time.Millisecond
	}
	a := newMulti(t, Options{}, tune)
	b := newMulti(t, Options{}, tune)
	freeze := make(chan struct{})
	proxy := testutil.ServeTCP(t, func(c net.Conn) {
		u, err := net.Dial("tcp", a.TCPAddr().String())
		if err != nil {
			return
		}
		t.Cleanup(func() { c.Close(); u.Close() })
		pipe := func(dst, src net.Conn) {
			buf := make([]byte, 4<<10)
			for {
				n, err := src.Read(buf)
				if err != nil {
					return
				}
				select {
				case <-freeze: // what comes now is dropped
				default:
					_, _ = dst.Write(buf[:n])
				}
			}
		}
		go pipe(c, u)
		pipe(u, c)
	}).String()
	out, err := b.DialTCP(ctxT(t), proxy, a.ID())
	if err != nil {
		t.Fatal(err)
	}
	in, err := a.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	in.Admit()
	exercise(t, out, in)
	close(freeze)
	start := time.Now()
	for _, c := range []Conn{out, in} {
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("a silent stream path stayed open")
		}
		if !strings.Contains(c.Err().Error(), "nothing heard") {
			t.Fatalf("closed with %v, want the idle timeout", c.Err())
		}
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("closed after %v, before the idle timeout", d)
	}
}
