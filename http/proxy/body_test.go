package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/http/admin"
	"peerdns/internal/testutil"
)

// bodyServer is a proxy whose admin domain answers the length of the
// body its handler got.
func bodyServer(t *testing.T, d Deps) (*Server, string) {
	t.Helper()
	d.HTTPAddr, d.HTTPSAddr, d.AdminDomain = "127.0.0.1:0", "127.0.0.1:0", "admin.p2p"
	d.Admin = func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString(strconv.Itoa(len(ctx.PostBody()))) }
	s := New(d)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	addr, _ := s.Addrs()
	return s, addr.String()
}

// post opens a connection and sends a head declaring n body bytes (n < 0:
// chunked) and, for a body longer than that, the part fasthttp reads
// with the head (the handler runs once it has come).
func post(t *testing.T, addr, host string, n int) net.Conn {
	t.Helper()
	te := "Content-Length: " + strconv.Itoa(n)
	if n < 0 {
		te = "Transfer-Encoding: chunked"
	}
	c := sendRaw(t, addr, "POST /up HTTP/1.1\r\nHost: "+host+"\r\n"+te+"\r\n\r\n")
	if n > prefetched {
		if _, err := c.Write(make([]byte, prefetched)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// sendRaw opens a connection to the edge at addr, closed when the test
// ends, and writes raw on it (nothing when raw is empty).
func sendRaw(t testing.TB, addr, raw string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if raw != "" {
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// answer reads one response: its status, headers and body.
func answer(t *testing.T, c net.Conn) (int, http.Header, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	if resp.Close {
		resp.Header.Set("Connection", "close")
	}
	return resp.StatusCode, resp.Header, b.String()
}

// TestBodyBudget: the bodies read whole for the in-process routes take
// their declared size from the budget before they are read; one that
// does not fit is a 503 with Retry-After at once; a request that
// completes, and one whose client goes away mid-body, give their share
// back; a body over the route's limit is 413 without being read.
func TestBodyBudget(t *testing.T) {
	s, addr := bodyServer(t, Deps{BodyBudget: 3 * BigBody})
	waitLeft := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			left, _ := s.budget.stats()
			if left == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("budget left %d, want %d", left, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	a := post(t, addr, "admin.p2p", 2*BigBody) // waits for its body, holding 2 of 3
	waitLeft(BigBody)
	b := post(t, addr, "admin.p2p", 2*BigBody) // does not fit
	if st, h, _ := answer(t, b); st != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" || h.Get("Connection") != "close" {
		t.Fatalf("over budget: %d Retry-After %q Connection %q, want 503, 1, close", st, h.Get("Retry-After"), h.Get("Connection"))
	}
	c := post(t, addr, "admin.p2p", BigBody) // fits beside a
	waitLeft(0)
	if _, err := c.Write(make([]byte, BigBody-prefetched)); err != nil {
		t.Fatal(err)
	}
	if st, _, body := answer(t, c); st != http.StatusOK || body != strconv.Itoa(BigBody) {
		t.Fatalf("a body within budget: %d %q", st, body)
	}
	waitLeft(BigBody)
	a.Close() // gone mid-body: its share comes back
	waitLeft(3 * BigBody)

	if st, _, _ := answer(t, post(t, addr, "admin.p2p", admin.MaxBody+1)); st != http.StatusRequestEntityTooLarge {
		t.Fatalf("over the admin limit: %d, want 413", st)
	}
	if refused := s.Counters().BodyRefused; refused != 1 {
		t.Fatalf("%d refused, want 1", refused)
	}
	// Small bodies never touch the budget; the connection stays open.
	f := post(t, addr, "admin.p2p", 5)
	if _, err := f.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if st, h, body := answer(t, f); st != http.StatusOK || body != "5" || h.Get("Connection") == "close" {
		t.Fatalf("a small body: %d %q Connection %q", st, body, h.Get("Connection"))
	}
	waitLeft(3 * BigBody)
}

// TestBodyChunked: a chunked body is read whole for the admin route up
// to its limit; past it, 413.
func TestBodyChunked(t *testing.T) {
	_, addr := bodyServer(t, Deps{})
	chunked := func(total, piece int) (int, string) {
		c := post(t, addr, "admin.p2p", -1)
		w := bufio.NewWriter(c)
		for sent := 0; sent < total; sent += piece {
			fmt.Fprintf(w, "%x\r\n%s\r\n", piece, strings.Repeat("x", piece))
		}
		fmt.Fprint(w, "0\r\n\r\n")
		go w.Flush() // the server may answer 413 before it has read all
		st, _, body := answer(t, c)
		return st, body
	}
	if st, body := chunked(300<<10, 10<<10); st != 200 || body != strconv.Itoa(300<<10) {
		t.Fatalf("chunked 300 KiB: %d %q", st, body)
	}
	if st, _ := chunked(admin.MaxBody+(64<<10), 64<<10); st != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked over the limit: %d, want 413", st)
	}
}

// TestBodyBetweenReads: a body may take much longer than ReadTimeout as
// long as it keeps coming; one that stalls for ReadTimeout is cut with
// 408. The client's pace is a tenth of ReadTimeout, so a loaded machine
// has most of ReadTimeout to deliver each piece (a piece every half of a
// 300 ms ReadTimeout left it 110 ms, which scheduling delays reached).
func TestBodyBetweenReads(t *testing.T) {
	const readTimeout = time.Second
	_, addr := bodyServer(t, Deps{ReadTimeout: readTimeout})
	const size = 64 << 10
	// send returns the answer and the longest time the client took
	// between two pieces.
	send := func(chunks int, pause time.Duration) (int, string, time.Duration) {
		t.Helper()
		c := post(t, addr, "admin.p2p", size)
		var longest time.Duration
		last := time.Now()
		for i := 0; i < chunks; i++ {
			time.Sleep(pause) // the client's pace, not a wait for a result
			longest = max(longest, time.Since(last))
			if _, err := c.Write(make([]byte, (size-prefetched)/chunks)); err != nil {
				break // cut: the answer says why
			}
			last = time.Now()
		}
		st, _, body := answer(t, c)
		return st, body, longest
	}
	// 64 KiB over 2.8 s: nearly three times ReadTimeout, a piece every
	// tenth of it. A client starved for most of ReadTimeout between two
	// pieces did stall (the node cuts after 7/8 of it): that run proves
	// nothing, and the body is sent again.
	for attempt := 1; ; attempt++ {
		st, body, longest := send(28, readTimeout/10)
		if st == http.StatusOK && body == strconv.Itoa(size) {
			break
		}
		if longest < readTimeout*7/8 || attempt == 3 {
			t.Fatalf("a body slower than ReadTimeout that keeps coming (at most %v between pieces): %d %q", longest, st, body)
		}
		t.Logf("the client took %v between two pieces: %d; again", longest, st)
	}
	// A pause of twice ReadTimeout after the part sent with the head
	// (the rest would complete the body): cut.
	if st, _, _ := send(1, 2*readTimeout); st != http.StatusRequestTimeout {
		t.Fatalf("a body that stalls: %d, want 408", st)
	}
}

// TestUnreadBodyCloses: a request answered without reading its body (no
// such site) closes its connection: what is left of the body cannot be
// told from a next request.
func TestUnreadBodyCloses(t *testing.T) {
	_, addr := bodyServer(t, Deps{})
	c := post(t, addr, "nowhere.p2p", 1<<20)
	if st, h, _ := answer(t, c); st != http.StatusNotFound || h.Get("Connection") != "close" {
		t.Fatalf("unknown host with a body: %d Connection %q, want 404 and close", st, h.Get("Connection"))
	}
	// A short body came with the head: the connection stays.
	d := post(t, addr, "nowhere.p2p", 5)
	if _, err := d.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if st, h, _ := answer(t, d); st != http.StatusNotFound || h.Get("Connection") == "close" {
		t.Fatalf("unknown host, short body: %d Connection %q", st, h.Get("Connection"))
	}
}

// TestRefusalLingers: a node that answers without reading a body (an
// unknown host, a body over the admin route's limit) closes lingering:
// after the answer it sends FIN and keeps taking what the client still
// sends, so a client that goes on writing is not reset (clients that
// stop at a failed write, and kernels that drop unread data on a reset,
// would lose the answer). Without the linger the writes below fail with
// a reset once the node has closed.
func TestRefusalLingers(t *testing.T) {
	_, addr := bodyServer(t, Deps{})
	for _, tc := range []struct {
		host   string
		status int
	}{{"nowhere.p2p", http.StatusNotFound}, {"admin.p2p", http.StatusRequestEntityTooLarge}} {
		c := post(t, addr, tc.host, 256<<20)
		br := bufio.NewReader(c)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !resp.Close {
			t.Fatalf("%s: %d close %v, want %d and close", tc.host, resp.StatusCode, resp.Close, tc.status)
		}
		// The node has closed its side by now (FIN after the answer).
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("%s: after the answer: %v, want EOF", tc.host, err)
		}
		piece := make([]byte, 64<<10)
		for sent := 0; sent < 16<<20; sent += len(piece) {
			if _, err := c.Write(piece); err != nil {
				t.Fatalf("%s: writing the rest of the body after the answer, at %d bytes: %v", tc.host, sent, err)
			}
		}
		c.Close()
	}
}

// TestOversizedHeadLingers: a head over MaxHeaderBytes is answered 431
// and the connection closed lingering, so a client still sending the
// rest of its head reads the 431, then EOF, and its writes are not reset
// (without the linger, the socket closed with the head's tail unread
// resets, and the client's kernel may drop the 431 it had not read yet).
func TestOversizedHeadLingers(t *testing.T) {
	_, addr := bodyServer(t, Deps{})
	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: admin.p2p\r\nX-Big: %s", strings.Repeat("a", MaxHeaderBytes+4096)); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("request %d: %d, want 431", i, resp.StatusCode)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("request %d: after the answer: %v, want EOF", i, err)
		}
		more := []byte(strings.Repeat("a", 16<<10))
		for sent := 0; sent < 1<<20; sent += len(more) {
			if _, err := c.Write(more); err != nil {
				t.Fatalf("request %d: writing the rest of the head after the answer, at %d bytes: %v", i, sent, err)
			}
		}
		c.Close()
	}
}

// TestLingeringBounded: past maxLingering connections lingering at once,
// a refused one is closed at once (a reset for a client still sending),
// and the lingering ones keep draining; once they end, refusals linger
// again.
func TestLingeringBounded(t *testing.T) {
	n := maxLingering.Load()
	t.Cleanup(func() { maxLingering.Store(n) }) // after the server's shutdown: cleanups run last first
	maxLingering.Store(2)
	idle := testutil.Zero(lingerCount.Load, "still lingering after their clients closed")
	testutil.Eventually(t, 10*time.Second, idle) // other tests' drains
	_, addr := bodyServer(t, Deps{})
	refused := func() (net.Conn, *bufio.Reader) {
		c := post(t, addr, "nowhere.p2p", 256<<20)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%d, want 404", resp.StatusCode)
		}
		return c, br
	}
	lingers := func(c net.Conn, br *bufio.Reader) error {
		if _, err := br.ReadByte(); err != io.EOF {
			return fmt.Errorf("after the answer: %v, want EOF", err)
		}
		piece := make([]byte, 64<<10)
		for sent := 0; sent < 4<<20; sent += len(piece) {
			if _, err := c.Write(piece); err != nil {
				return fmt.Errorf("writing after the answer, at %d bytes: %v", sent, err)
			}
		}
		return nil
	}
	var held []net.Conn
	for i := 0; i < 2; i++ {
		c, br := refused()
		if err := lingers(c, br); err != nil {
			t.Fatalf("connection %d of the limit: %v", i, err)
		}
		held = append(held, c)
	}
	c, br := refused()
	if err := lingers(c, br); err == nil {
		t.Fatal("a third connection lingered past a limit of two")
	}
	c.Close()
	for _, h := range held {
		h.Close()
	}
	testutil.Eventually(t, 10*time.Second, idle)
	if err := lingers(refused()); err != nil {
		t.Fatalf("once the others ended: %v", err)
	}
}
