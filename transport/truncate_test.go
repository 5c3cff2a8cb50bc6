package transport

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// cutProxy forwards TCP connections to target and, once cutAfter bytes
// went from the dialer to target, ends both connections cleanly (FIN),
// as a relay or middlebox that truncates the byte stream would.
func cutProxy(t *testing.T, target string, cutAfter int) string {
	return testutil.ServeTCP(t, func(c net.Conn) {
		u, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		t.Cleanup(func() { c.Close(); u.Close() })
		back := make(chan struct{})
		go func() { _, _ = io.Copy(c, u); close(back) }()
		_, _ = io.CopyN(u, c, int64(cutAfter))
		_ = u.(*net.TCPConn).CloseWrite()
		_ = c.(*net.TCPConn).CloseWrite()
		<-back
	}).String()
}

// A stream path cut in the middle of a stream's data ends that stream
// with an error, not the clean end of stream its writer's FIN gives: a
// reader (a tunnel, which passes a clean end on as a half-close) must
// not take the bytes it got before the cut for the whole.
func TestCutStreamPathIsNoCleanEnd(t *testing.T) {
	a := newMulti(t, Options{})
	b := newMulti(t, Options{})
	proxy := cutProxy(t, a.TCPAddr().String(), 40_000)
	out, err := b.DialTCP(ctxT(t), proxy, a.ID())
	if err != nil {
		t.Fatal(err)
	}
	in, err := a.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	got := make(chan result, 1)
	go func() {
		s, err := in.AcceptStream(ctxT(t))
		if err != nil {
			got <- result{0, err}
			return
		}
		defer s.Close()
		_ = s.SetReadDeadline(time.Now().Add(20 * time.Second))
		b, err := io.ReadAll(s)
		got <- result{len(b), err}
	}()
	s, err := out.OpenStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte{'a'}, 1<<20)
	_, _ = s.Write(payload) // fails once the path is cut
	r := <-got
	if r.n >= len(payload) {
		t.Fatalf("read all %d bytes through a path cut after 40,000", r.n)
	}
	if r.err == nil || errors.Is(r.err, io.EOF) {
		t.Fatalf("a stream cut after %d bytes ended with %v, as if its writer had ended it", r.n, r.err)
	}
	var ne net.Error
	if errors.As(r.err, &ne) && ne.Timeout() {
		t.Fatalf("the cut was never noticed: %v after %d bytes", r.err, r.n)
	}
}
