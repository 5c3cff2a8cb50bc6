package proxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"peerdns/internal/testutil"
	"peerdns/internal/view"
)

// idleUpstream answers each request with "answer to <path>" (a HEAD
// with that answer's head alone); after the
// first answer on its first connection it runs after(c) (while the
// edge holds that connection idle). conns counts the connections it
// accepted.
func idleUpstream(t *testing.T, after func(c net.Conn)) (addr string, conns *atomic.Int64) {
	t.Helper()
	conns = new(atomic.Int64)
	up := testutil.ServeTCP(t, func(c net.Conn) {
		first := conns.Add(1) == 1
		testutil.ReadRequests(c, func(req *http.Request) bool {
			_, _ = io.Copy(io.Discard, req.Body)
			body := "answer to " + req.URL.Path
			head := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(body))
			if req.Method == http.MethodHead {
				body = ""
			}
			if _, err := io.WriteString(c, head+body); err != nil {
				return false
			}
			if first {
				first = false
				after(c)
			}
			return true
		})
	})
	return up.String(), conns
}

// delivered waits until the peer of c has acknowledged every byte c sent
// (TCP_INFO's unacked count is 0): what c wrote is in the peer's socket.
func delivered(t *testing.T, c net.Conn) {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		var unacked uint32
		var ierr error
		if err := raw.Control(func(fd uintptr) {
			var info *unix.TCPInfo
			if info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); ierr == nil {
				unacked = info.Unacked
			}
		}); err != nil || ierr != nil {
			t.Fatal(err, ierr)
		}
		if unacked == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d segments still unacknowledged", unacked)
		}
		time.Sleep(time.Millisecond)
	}
}

func idleEdge(t *testing.T, addr string) (do func(method, path string) (int, string)) {
	t.Helper()
	s := New(Deps{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", AdminDomain: "admin.p2p",
		View: publishedView(map[string]string{"idle.p2p": "hs://idle"}), Dialer: tcpDialer{"hs://idle": addr}})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	edge, _ := s.Addrs()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	return func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+edge.String()+path, strings.NewReader(""))
		if method == http.MethodPost {
			req, _ = http.NewRequest(method, "http://"+edge.String()+path, strings.NewReader("form=1"))
		}
		req.Host = "idle.p2p"
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: body: %v", method, path, err)
		}
		return resp.StatusCode, string(b)
	}
}

// TestIdleUpstreamSpoke: a keep-alive connection on which the upstream
// sent something while the edge held it idle is closed unused, and the
// next request (possibly another client's) goes on a new one:
//   - a second, unasked answer, which would have been taken for the next
//     request's answer;
//   - a body after its answer to a HEAD, which looks like an answer;
//   - its close (FIN), on which a POST (which is not sent twice) would
//     have failed with 502.
func TestIdleUpstreamSpoke(t *testing.T) {
	write := func(s string) func(t *testing.T, c net.Conn) {
		return func(t *testing.T, c net.Conn) {
			if _, err := io.WriteString(c, s); err != nil {
				t.Error(err)
			}
		}
	}
	for _, tc := range []struct {
		name          string
		first, second string // the two requests' methods
		spoke         func(t *testing.T, c net.Conn)
	}{
		{"unasked answer", "GET", "GET", write("HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nunasked!")},
		{"body after a HEAD", "HEAD", "GET", write("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody")},
		{"closed", "GET", "POST", func(t *testing.T, c net.Conn) {
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				t.Error(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answered, spoke := make(chan struct{}), make(chan struct{})
			addr, conns := idleUpstream(t, func(c net.Conn) {
				// Once the client has the first answer, the edge has
				// read it and holds the connection idle.
				<-answered
				tc.spoke(t, c)
				// What it sent (or its FIN) is in the edge's socket once
				// acknowledged.
				delivered(t, c)
				close(spoke)
			})
			do := idleEdge(t, addr)
			if st, _ := do(tc.first, "/first"); st != 200 {
				t.Fatalf("first: %d", st)
			}
			close(answered)
			<-spoke
			if st, body := do(tc.second, "/second"); st != 200 || body != "answer to /second" {
				t.Fatalf("second: %d %q, want 200 %q", st, body, "answer to /second")
			}
			if n := conns.Load(); n != 2 {
				t.Errorf("%d upstream connections, want 2 (the one that spoke while idle closed)", n)
			}
		})
	}
}

// heldWrites is a connection whose writes, once hold is set, wait for
// flush and go to the socket in one write.
type heldWrites struct {
	net.Conn
	hold bool
	buf  []byte
}

func (c *heldWrites) Write(b []byte) (int, error) {
	if c.hold {
		c.buf = append(c.buf, b...)
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *heldWrites) flush() error {
	c.hold = false
	_, err := c.Conn.Write(c.buf)
	c.buf = nil
	return err
}

// TestIdleTLSUpstreamSpeaksUnasked: an upstream in TLS (ssl: true) whose
// second, unasked answer came as a record of its own in the same read
// as the first answer's (so TLS holds it, and the socket shows nothing)
// does not have it taken for the next request's answer.
func TestIdleTLSUpstreamSpeaksUnasked(t *testing.T) {
	_, cert := testLeaf(t, "tls.p2p")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var conns atomic.Int64
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			first := conns.Add(1) == 1
			go func() {
				defer raw.Close()
				hw := &heldWrites{Conn: raw}
				c := tls.Server(hw, &tls.Config{Certificates: []tls.Certificate{*cert}})
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					body := "answer to " + req.URL.Path
					hw.hold = first // the answer and the unasked one in one write
					if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
						return
					}
					if first {
						first = false
						if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nunasked!"); err != nil {
							return
						}
						if err := hw.flush(); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	snap := &view.Snapshot{Version: 1, Domains: map[string]*view.Domain{
		"tls.p2p": {Name: "tls.p2p", Status: "resolved", Hash: "hs://tls", SSL: true}}}
	var pub view.Published
	pub.Store(snap)
	s := New(Deps{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", AdminDomain: "admin.p2p",
		View: &pub, Dialer: tcpDialer{"hs://tls": ln.Addr().String()}})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	edge, _ := s.Addrs()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for _, path := range []string{"/first", "/second"} {
		req, _ := http.NewRequest("GET", "http://"+edge.String()+path, nil)
		req.Host = "tls.p2p"
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "answer to "+path {
			t.Fatalf("%s: %d %q, want 200 %q", path, resp.StatusCode, b, "answer to "+path)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d upstream connections, want 2", n)
	}
}

// watchedPairs makes n loopback TCP connections, each wrapped as a
// pooled upstream connection of w, and returns them with their peers
// (the upstream's ends).
func watchedPairs(t *testing.T, w *idleWatch, n int) (conns []*movingDeadlines, peers []net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		p, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		mc := &movingDeadlines{Conn: c, pool: w}
		t.Cleanup(func() { mc.Close(); p.Close() })
		conns, peers = append(conns, mc), append(peers, p)
	}
	return conns, peers
}

// idlePairs is a watch whose looks serve for every, and n connections
// of its pool (watchedPairs) gone back to it, with their peers.
func idlePairs(t *testing.T, every time.Duration, n int) (*idleWatch, []*movingDeadlines, []net.Conn) {
	t.Helper()
	w := newIdleWatch()
	w.every = int64(every)
	conns, peers := watchedPairs(t, w, n)
	for _, mc := range conns {
		w.add(mc)
	}
	return w, conns, peers
}

// TestIdleWatchLooksTogether: one look into a pool's idle connections
// marks each that had something come in, and serves the others handed
// out after it (within lookEvery) without a look of their own; a
// connection back in the pool since the last look gets a new one.
func TestIdleWatchLooksTogether(t *testing.T) {
	w, conns, peers := idlePairs(t, time.Hour, 3) // no look goes stale within the test
	a, b, c := conns[0], conns[1], conns[2]
	if _, err := io.WriteString(peers[1], "HTTP/1.1 200 OK\r\n"); err != nil {
		t.Fatal(err)
	}
	delivered(t, peers[1])
	if w.spoke(a, false) {
		t.Fatal("a: spoke, nothing came in")
	}
	if w.looks != 1 {
		t.Fatalf("%d looks handing out a, want 1", w.looks)
	}
	if !w.spoke(b, false) {
		t.Fatal("b: the look did not see what came in")
	}
	if w.spoke(c, false) {
		t.Fatal("c: spoke, nothing came in")
	}
	if w.looks != 1 {
		t.Fatalf("%d looks after handing out b and c, want 1 (the first served)", w.looks)
	}
	// a goes back and then its upstream closes: handed out again, it has
	// not been looked into since it went back, so it is now.
	w.add(a)
	if err := peers[0].(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	delivered(t, peers[0])
	if !w.spoke(a, false) {
		t.Fatal("a: its upstream's close not seen")
	}
	if w.looks != 2 {
		t.Fatalf("%d looks, want 2", w.looks)
	}
	if len(w.idle) != 0 {
		t.Fatalf("%d connections left idle, want 0", len(w.idle))
	}
}

// TestIdleWatchLooksForOnce: a connection handed out for a request that
// is never sent twice is looked into alone, now, not served by the
// pool's last look: its upstream's close after that look is seen.
func TestIdleWatchLooksForOnce(t *testing.T) {
	w, conns, peers := idlePairs(t, time.Hour, 3) // the shared look never goes stale
	if w.spoke(conns[0], false) {
		t.Fatal("spoke, nothing came in")
	}
	for i := 1; i <= 2; i++ {
		if err := peers[i].(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		delivered(t, peers[i])
	}
	// The shared look, made before the closes, still serves an
	// idempotent request (the window idleWatch's doc names)...
	if w.spoke(conns[1], false) {
		t.Fatal("the shared look saw a close that came after it")
	}
	// ...but not one that is never sent twice.
	if !w.spoke(conns[2], true) {
		t.Fatal("a POST's connection: its upstream's close not seen")
	}
	if w.looks != 1 {
		t.Fatalf("%d shared looks, want 1", w.looks)
	}
}

// TestIdleWatchStaleLook: a look older than lookEvery serves no
// connection handed out after it: a new look is made.
func TestIdleWatchStaleLook(t *testing.T) {
	w, conns, peers := idlePairs(t, 0, 2)
	if w.spoke(conns[0], false) {
		t.Fatal("spoke, nothing came in")
	}
	if _, err := io.WriteString(peers[1], "x"); err != nil {
		t.Fatal(err)
	}
	delivered(t, peers[1])
	if !w.spoke(conns[1], false) {
		t.Fatal("what came in after the first look not seen")
	}
	if w.looks != 2 {
		t.Fatalf("%d looks, want 2", w.looks)
	}
}

// TestIdleWatchClosedLeaves: an idle connection closed (by the pool's
// cleaner) leaves the watch, and the rest are still looked into.
func TestIdleWatchClosedLeaves(t *testing.T) {
	w, conns, peers := idlePairs(t, lookEvery, 3)
	if err := conns[1].Close(); err != nil {
		t.Fatal(err)
	}
	if len(w.idle) != 2 {
		t.Fatalf("%d idle after a close, want 2", len(w.idle))
	}
	if _, err := io.WriteString(peers[2], "x"); err != nil {
		t.Fatal(err)
	}
	delivered(t, peers[2])
	if w.spoke(conns[0], false) || !w.spoke(conns[2], false) {
		t.Fatal("wrong connections seen to have spoken")
	}
}

// TestIdleWatchConcurrent: exchanges handing connections out and back,
// and closing some, from many goroutines at once (run under -race):
// every connection whose upstream wrote while it was idle is seen, none
// other is, and the watch's list stays whole.
func TestIdleWatchConcurrent(t *testing.T) {
	w := newIdleWatch()
	w.every = int64(50 * time.Microsecond)
	const n = 16
	conns, peers := watchedPairs(t, w, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mc := conns[i]
			for j := range 200 {
				w.add(mc)
				if spoke := w.spoke(mc, false); spoke {
					t.Errorf("connection %d round %d: spoke, nothing came in", i, j)
					return
				}
			}
			if i%4 == 0 {
				w.add(mc)
				mc.Close()
			}
		}()
	}
	wg.Wait()
	if len(w.idle) != 0 {
		t.Fatalf("%d left in the list, want 0", len(w.idle))
	}
	// Each of the rest goes back, its upstream writes, and all are
	// handed out at once.
	var live []int
	for i := range n {
		if i%4 != 0 {
			live = append(live, i)
			w.add(conns[i])
		}
	}
	for _, i := range live {
		if i%2 == 1 {
			if _, err := io.WriteString(peers[i], "x"); err != nil {
				t.Fatal(err)
			}
			delivered(t, peers[i])
		}
	}
	for _, i := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, want := w.spoke(conns[i], false), i%2 == 1; got != want {
				t.Errorf("connection %d: spoke %v, want %v", i, got, want)
			}
		}()
	}
	wg.Wait()
	for i, mc := range w.idle {
		if mc.peek.idx != i {
			t.Fatalf("list entry %d says it is at %d", i, mc.peek.idx)
		}
	}
}
