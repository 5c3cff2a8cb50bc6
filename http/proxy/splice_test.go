package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// splicingDialer dials as tcpDialer and hands out connections that let
// the edge splice from their socket (tcpSource), counting what it moved.
type splicingDialer struct {
	tcpDialer
	moved *atomic.Int64
}

type splicedConn struct {
	net.Conn
	moved *atomic.Int64
}

func (c splicedConn) TCPConn() *net.TCPConn { return c.Conn.(*net.TCPConn) }
func (c splicedConn) CountRead(n int64)     { c.moved.Add(n) }

func (d splicingDialer) Dial(ctx context.Context, hash string) (net.Conn, error) {
	c, err := d.tcpDialer.Dial(ctx, hash)
	if err != nil {
		return nil, err
	}
	return splicedConn{c, d.moved}, nil
}

// sizedUpstream answers each request on a connection by its path:
// /n/SIZE a body of SIZE bytes (pattern), keep-alive; /short/SIZE
// declares SIZE and closes after a third of it; /stall/SIZE declares
// SIZE, sends a third and then nothing until the test ends; /late/SIZE
// sends its head, and its body once told on late. It counts the
// connections it accepted.
func sizedUpstream(t *testing.T, conns *atomic.Int64, late <-chan struct{}) string {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	addr := testutil.ServeTCP(t, func(c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			kind, size, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
			n, _ := strconv.Atoi(size)
			if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", n); err != nil {
				return
			}
			switch kind {
			case "n":
				if writePattern(c, n) != nil {
					return
				}
			case "late":
				<-late
				if writePattern(c, n) != nil {
					return
				}
			case "short":
				_ = writePattern(c, n/3)
				return
			case "stall":
				_ = writePattern(c, n/3)
				<-stop
				return
			}
		}
	})
	return addr.String()
}

// pattern is n bytes that tell a shifted or missing piece.
func pattern(n int) []byte {
	b := make([]byte, n)
	fillPattern(b, 0)
	return b
}

// fillPattern fills b with pattern's bytes from offset off on.
func fillPattern(b []byte, off int) {
	for i := range b {
		b[i] = byte((off+i)*7 + (off+i)>>10)
	}
}

// writePattern writes pattern(n) to w a piece at a time, each made just
// before it goes, as a server streams what it makes: made whole first,
// the bytes of a large body (8 MiB under the race detector, on a loaded
// machine) took longer than the edge's UpstreamTimeout in some of these
// tests, which then rightly cut the body after its head.
func writePattern(w io.Writer, n int) error {
	buf := make([]byte, 64<<10)
	for off := 0; off < n; {
		b := buf[:min(len(buf), n-off)]
		fillPattern(b, off)
		if _, err := w.Write(b); err != nil {
			return err
		}
		off += len(b)
	}
	return nil
}

// splicedSince is what moved counts past before once no piece is being
// spliced (a piece is counted when its splice returns, which may be
// after the client has read it).
func splicedSince(t *testing.T, moved *atomic.Int64, before int64) int64 {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := len(spliceSlots); n > 0 {
			return fmt.Errorf("%d pieces being spliced", n)
		}
		return nil
	})
	return moved.Load() - before
}

// Bodies from a TCP upstream on this machine to a plain HTTP/1.1 client
// go socket to socket (counted as read by the upstream's connection),
// whole and in order, at any size above what is read whole, over one
// kept-alive upstream connection; HTTPS clients get the same bodies,
// copied, and so are plain HTTP clients' while every splice slot is
// taken. An upstream that closes short of its declared length, or goes
// silent past UpstreamTimeout, and a client that reads nothing past
// WriteTimeout, are cut as when the body is copied.
func TestEdgeSplicesBodiesFromThisMachine(t *testing.T) {
	var moved, conns atomic.Int64
	late := make(chan struct{})
	up := sizedUpstream(t, &conns, late)
	e := startTestEdge(t, map[string]string{"sp.p2p": up}, Deps{
		NoHTTP3: true,
		Dialer:  splicingDialer{tcpDialer{"hs://sp": up}, &moved},
		// Short enough for the silent upstream and the client that reads
		// nothing to be cut soon, long enough for the race detector on a
		// loaded machine not to cut a body that flows.
		UpstreamTimeout: 2 * time.Second,
		WriteTimeout:    2 * time.Second,
	})
	httpAddr, _ := e.s.Addrs()
	c := sendRaw(t, httpAddr.String(), "")
	for _, n := range []int{wholeBody + 1, 64 << 10, 1<<20 + 7, 8 << 20} {
		before := moved.Load()
		if _, err := fmt.Fprintf(c, "GET /n/%d HTTP/1.1\r\nHost: sp.p2p\r\n\r\n", n); err != nil {
			t.Fatal(err)
		}
		code, _, body := answer(t, c)
		if code != 200 || !bytes.Equal([]byte(body), pattern(n)) {
			t.Fatalf("%d bytes: %d, %d bytes, equal %v", n, code, len(body), bytes.Equal([]byte(body), pattern(n)))
		}
		// What came with the head (at most the pool's read buffer) is
		// copied; the rest is spliced.
		if m := splicedSince(t, &moved, before); m < int64(n-4096) || m > int64(n) {
			t.Fatalf("%d bytes: %d spliced", n, m)
		}
	}
	// A body that comes after its head: the head reaches the client
	// first, on its own, then the body.
	before := moved.Load()
	fmt.Fprintf(c, "GET /late/%d HTTP/1.1\r\nHost: sp.p2p\r\n\r\n", 1<<20)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the head of a body that comes later: %v", err)
	}
	close(late)
	b, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(b, pattern(1<<20)) {
		t.Fatalf("a body after its head: %d bytes, %v", len(b), err)
	}
	if m := splicedSince(t, &moved, before); m != 1<<20 {
		t.Fatalf("a body after its head: %d bytes spliced, want all", m)
	}
	if br.Buffered() != 0 {
		t.Fatalf("%d bytes after the answer", br.Buffered())
	}
	// Every splice slot taken: the body is copied, after what came with
	// its head, whole all the same.
	for range cap(spliceSlots) {
		spliceSlots <- struct{}{}
	}
	before = moved.Load()
	fmt.Fprintf(c, "GET /n/%d HTTP/1.1\r\nHost: sp.p2p\r\n\r\n", 1<<20)
	code, _, body := answer(t, c)
	for range cap(spliceSlots) {
		<-spliceSlots
	}
	if code != 200 || !bytes.Equal([]byte(body), pattern(1<<20)) || moved.Load() != before {
		t.Fatalf("no slot free: %d, %d bytes, equal %v, %d spliced", code, len(body), bytes.Equal([]byte(body), pattern(1<<20)), moved.Load()-before)
	}
	if k := conns.Load(); k != 1 {
		t.Fatalf("%d upstream connections for six answers on one client connection, want 1", k)
	}

	// HTTPS: copied, the same bytes.
	before = moved.Load()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			_, httpsAddr := e.s.Addrs()
			return (&net.Dialer{}).DialContext(ctx, "tcp", httpsAddr.String())
		},
		TLSClientConfig: &tls.Config{RootCAs: e.s.d.CA.Pool()},
	}
	defer tr.CloseIdleConnections()
	resp, err = (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://sp.p2p/n/300000")
	if err != nil {
		t.Fatal(err)
	}
	b, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(b, pattern(300000)) || moved.Load() != before {
		t.Fatalf("HTTPS: %d bytes, %v, %d spliced", len(b), err, moved.Load()-before)
	}

	// Cut short, or silent: the client's connection ends short of the
	// declared length (not a clean end), within the timeouts.
	for _, path := range []string{"/short/1000000", "/stall/1000000"} {
		c := sendRaw(t, httpAddr.String(), "GET "+path+" HTTP/1.1\r\nHost: sp.p2p\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		got, err := io.ReadAll(resp.Body)
		if !errors.Is(err, io.ErrUnexpectedEOF) || len(got) != 1000000/3 || !bytes.Equal(got, pattern(1000000)[:len(got)]) {
			t.Fatalf("%s: %d bytes, %v; want the third sent, then a cut", path, len(got), err)
		}
		c.Close()
	}

	// A client that reads nothing: its connection is closed, not held.
	base := e.s.OpenConns()
	slow, err := net.DialTCP("tcp", nil, httpAddr.(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	_ = slow.SetReadBuffer(4096)
	fmt.Fprintf(slow, "GET /n/%d HTTP/1.1\r\nHost: sp.p2p\r\n\r\n", 64<<20)
	testutil.Eventually(t, 10*time.Second, func() error {
		if e.s.OpenConns() == base {
			return errors.New("the client that reads nothing is not connected yet")
		}
		return nil
	})
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := e.s.OpenConns(); n > base {
			return fmt.Errorf("%d client connections open, %d before the one that reads nothing", n, base)
		}
		return nil
	})
}

// Twice as many downloads at once as there are splice slots: pieces that
// find none are copied, mid-body too, and every body arrives whole.
func TestEdgeSplicesManyAtOnce(t *testing.T) {
	var moved, conns atomic.Int64
	up := sizedUpstream(t, &conns, nil)
	e := startTestEdge(t, map[string]string{"sp.p2p": up}, Deps{
		NoHTTP3: true,
		Dialer:  splicingDialer{tcpDialer{"hs://sp": up}, &moved},
	})
	httpAddr, _ := e.s.Addrs()
	errs := make(chan error, 2*cap(spliceSlots))
	for i := range 2 * cap(spliceSlots) {
		go func() {
			n := 1<<20 + i*4099
			c, err := net.Dial("tcp", httpAddr.String())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "GET /n/%d HTTP/1.1\r\nHost: sp.p2p\r\n\r\n", n)
			// A bound for a hang: under the race detector on a loaded
			// machine, 64 MiB made, proxied and compared can take a while.
			_ = c.SetReadDeadline(time.Now().Add(90 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				errs <- err
				return
			}
			b, err := io.ReadAll(resp.Body)
			if err == nil && !bytes.Equal(b, pattern(n)) {
				err = fmt.Errorf("%d bytes of %d, not the upstream's", len(b), n)
			}
			errs <- err
		}()
	}
	for range 2 * cap(spliceSlots) {
		if err := <-errs; err != nil {
			t.Fatalf("one of %d downloads at once: %v", 2*cap(spliceSlots), err)
		}
	}

	if splicedSince(t, &moved, 0) == 0 {
		t.Fatal("nothing spliced")
	}
}
