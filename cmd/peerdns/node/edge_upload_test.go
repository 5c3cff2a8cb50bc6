package node

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// TestEdgeStreamsUploads: request bodies pass the edge as they come. The
// upstream has the first half of an upload while the client still holds
// the second; an upload larger than any buffer the edge could keep, and
// a chunked one, one over HTTPS and one after "Expect: 100-continue"
// arrive byte for byte; a body slower than the read
// timeout that keeps coming passes, and one that stalls is cut with 408.
func TestEdgeStreamsUploads(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.edgeReadTimeout = 500 * time.Millisecond
	n := startConfig(t, cfg)
	base := "http://" + n.AdminAddr()

	port, got := hashingBackend(t)
	_, url := tunnelServerURL(t, n, fmt.Sprintf(`{"name":"up","port":%d}`, port))
	mustJSON(t, "POST", base+"/api/add-domain", `{"domain":"up.p2p","hash":"`+url+`"}`, 200, nil)
	httpAddr, httpsAddr := n.EdgeAddrs()
	c := edgeClient(httpAddr, nil)
	c.Timeout = 60 * time.Second
	pool := rootPool(t, n)
	secure := edgeClient(httpsAddr, pool)
	secure.Timeout = 60 * time.Second
	waitServed(t, c, "http://up.p2p/")

	upload(t, c, "http://up.p2p/upload", "72 MiB, more than the edge ever buffered", 72<<20, false)
	upload(t, c, "http://up.p2p/upload", "9 MiB chunked", 9<<20, true)
	upload(t, secure, "https://up.p2p/upload", "9 MiB over HTTPS", 9<<20, false)

	// Half an upload reaches the upstream before the client sends the rest.
	const half = 4 << 20
	first := halfFirst(t, httpAddr, "up.p2p", half, got, 64<<10)

	// Expect: 100-continue (curl sends it for bodies over 1 MiB): the
	// edge answers 100 itself, then streams the body.
	cont, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer cont.Close()
	fmt.Fprintf(cont, "PUT /cont HTTP/1.1\r\nHost: up.p2p\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", half)
	_ = cont.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(cont)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("before the body: %q %v, want 100 Continue", line, err)
	}
	if _, err := br.ReadString('\n'); err != nil { // the blank line after it
		t.Fatal(err)
	}
	if _, err := cont.Write(first); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	sum := sha256.New()
	sum.Write(first)
	if want := fmt.Sprintf("%d %x", half, sum.Sum(nil)); resp.StatusCode != 200 || string(b) != want {
		t.Fatalf("after 100 Continue: %d %q, want 200 %q", resp.StatusCode, b, want)
	}

	// Slower than the read timeout in all (2 s against 0.5 s), but never
	// silent for as long as it: passes, over HTTP and HTTPS.
	plainDial, tlsDial := edgeDials(t, n, "up.p2p")
	for _, dial := range []func() (net.Conn, error){plainDial, tlsDial} {
		slow, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		defer slow.Close()
		const pieces, piece = 8, 16 << 10
		fmt.Fprintf(slow, "POST /slow HTTP/1.1\r\nHost: up.p2p\r\nContent-Length: %d\r\n\r\n", pieces*piece)
		for i := 0; i < pieces; i++ {
			if _, err := slow.Write(make([]byte, piece)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(250 * time.Millisecond) // the client's pace, not a wait for a result
		}
		if st, body := rawAnswer(t, slow); st != 200 || !strings.HasPrefix(body, fmt.Sprint(pieces*piece)+" ") {
			t.Fatalf("a slow upload that keeps coming (%T): %d %q", slow, st, body)
		}
	}

	// Silent for longer than the read timeout mid-body: 408.
	stall, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	fmt.Fprintf(stall, "POST /stall HTTP/1.1\r\nHost: up.p2p\r\nContent-Length: %d\r\n\r\n", 1<<20)
	if _, err := stall.Write(make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	if st, _ := rawAnswer(t, stall); st != http.StatusRequestTimeout {
		t.Fatalf("a stalled upload: %d, want 408", st)
	}
}

// rawAnswer reads one response from c.
func rawAnswer(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// hashingBackend is an upstream that reads each request body to its end
// and answers its length and SHA-256; got counts the bytes it has read of
// the request that started last.
func hashingBackend(t *testing.T) (int, *atomic.Int64) {
	got := new(atomic.Int64)
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(0)
		h := sha256.New()
		buf := make([]byte, 32<<10)
		n := 0
		for {
			k, err := r.Body.Read(buf)
			h.Write(buf[:k])
			n += k
			got.Store(int64(n))
			if err != nil {
				break
			}
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	}))
	t.Cleanup(back.Close)
	return back.Listener.Addr().(*net.TCPAddr).Port, got
}

// upload sends size bytes of a seeded stream (chunked when chunked is
// set) and checks what the upstream says it got.
func upload(t *testing.T, c *http.Client, url, name string, size int64, chunked bool) {
	t.Helper()
	sum := sha256.New()
	body := io.TeeReader(io.LimitReader(rand.NewChaCha8([32]byte{byte(size)}), size), sum)
	var rd io.Reader = body
	if chunked {
		rd = struct{ io.Reader }{body} // no length known: chunked
	}
	req, _ := http.NewRequest("POST", url, rd)
	if !chunked {
		req.ContentLength = size
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("%d %x", size, sum.Sum(nil)); resp.StatusCode != 200 || string(b) != want {
		t.Fatalf("%s: %d %q, want 200 %q", name, resp.StatusCode, b, want)
	}
}

// TestEdgeStreamsUploadsThroughTunnel: the same through a tunnel to
// another node: B's edge streams an upload over QUIC to A's backend
// (the first half is there before the client sends the second), and
// larger and chunked ones arrive whole.
func TestEdgeStreamsUploadsThroughTunnel(t *testing.T) {
	nodes := newNetwork(t, 2)
	a, b := nodes[0], nodes[1]
	port, got := hashingBackend(t)
	_, url := tunnelServerURL(t, a, fmt.Sprintf(`{"name":"far","port":%d,"domain":"far.p2p"}`, port))
	httpAddr, _ := b.EdgeAddrs()
	c := edgeClient(httpAddr, nil)
	c.Timeout = 60 * time.Second
	testutil.Eventually(t, 20*time.Second, func() error {
		if cs := consensusOn(t, b, "far.p2p"); cs.Status != "resolved" || cs.Hash == nil || *cs.Hash != url {
			return fmt.Errorf("far.p2p on B: %+v", cs)
		}
		return nil
	})
	waitServed(t, c, "http://far.p2p/")
	upload(t, c, "http://far.p2p/upload", "24 MiB through the tunnel", 24<<20, false)
	upload(t, c, "http://far.p2p/upload", "5 MiB chunked through the tunnel", 5<<20, true)

	halfFirst(t, httpAddr, "far.p2p", 2<<20, got, 256<<10)
}

// halfFirst sends a request declaring 2×half body bytes through the edge
// at addr, then half of them, and waits until the upstream has all but
// slack of those before it sends the rest: a proxy that read bodies
// whole would hold them all. It checks the answer and returns the half
// it sent (twice).
func halfFirst(t *testing.T, addr, host string, half int, got *atomic.Int64, slack int64) []byte {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	piece := make([]byte, half)
	for i := range piece {
		piece[i] = byte(i)
	}
	fmt.Fprintf(raw, "POST /half HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n", host, 2*half)
	if _, err := raw.Write(piece); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if g := got.Load(); g < int64(half)-slack {
			return fmt.Errorf("the upstream has %d of the %d bytes sent so far", g, half)
		}
		return nil
	})
	if _, err := raw.Write(piece); err != nil {
		t.Fatal(err)
	}
	sum := sha256.New()
	sum.Write(piece)
	sum.Write(piece)
	if st, body := rawAnswer(t, raw); st != 200 || body != fmt.Sprintf("%d %x", 2*half, sum.Sum(nil)) {
		t.Fatalf("the streamed upload: %d %q", st, body)
	}
	return piece
}

// TestEdgeUploadsPerUpstream: uploads that stream hold an upstream
// connection each, so their number per upstream is capped: past it an
// upload is 503 with Retry-After, while requests whose small body is
// read whole first (here a 32 KiB form) still pass; once an upload ends
// its place is free again.
func TestEdgeUploadsPerUpstream(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.edgeMaxUploads = 1
	n := startConfig(t, cfg)
	port, got := hashingBackend(t)
	_, url := tunnelServerURL(t, n, fmt.Sprintf(`{"name":"cap","port":%d}`, port))
	mustJSON(t, "POST", "http://"+n.AdminAddr()+"/api/add-domain", `{"domain":"cap.p2p","hash":"`+url+`"}`, 200, nil)
	httpAddr, _ := n.EdgeAddrs()
	c := edgeClient(httpAddr, nil)
	waitServed(t, c, "http://cap.p2p/")

	// One upload streaming, holding the one place.
	const size = 1 << 20
	held, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	fmt.Fprintf(held, "POST /held HTTP/1.1\r\nHost: cap.p2p\r\nContent-Length: %d\r\n\r\n", size)
	if _, err := held.Write(make([]byte, size/2)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if g := got.Load(); g < size/4 {
			return fmt.Errorf("the upstream has %d bytes of the held upload", g)
		}
		return nil
	})

	// A second upload: refused at once, its body unread.
	second, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	fmt.Fprintf(second, "POST /second HTTP/1.1\r\nHost: cap.p2p\r\nContent-Length: %d\r\n\r\n", size)
	if _, err := second.Write(make([]byte, 16<<10)); err != nil {
		t.Fatal(err)
	}
	_ = second.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(second), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !resp.Close {
		t.Fatalf("an upload past the cap: %d Retry-After %q close %v, want 503, 1, true", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Close)
	}

	// A small body is read whole first: it takes no place.
	upload(t, c, "http://cap.p2p/form", "a 32 KiB form beside the held upload", 32<<10, false)

	// HTTP/2 uploads count with HTTP/1.1's: one is refused too, and a
	// small body passes.
	_, httpsAddr := n.EdgeAddrs()
	h2 := h2Client(httpsAddr, rootPool(t, n))
	req, _ := http.NewRequest("POST", "https://cap.p2p/second-h2", bytes.NewReader(make([]byte, size)))
	resp, err = h2.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("an HTTP/2 upload past the cap: HTTP/%d %d Retry-After %q, want HTTP/2 503, 1", resp.ProtoMajor, resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	upload(t, h2, "https://cap.p2p/form-h2", "a 32 KiB form over HTTP/2 beside the held upload", 32<<10, false)

	// The held upload ends; its place is free.
	if _, err := held.Write(make([]byte, size/2)); err != nil {
		t.Fatal(err)
	}
	if st, body := rawAnswer(t, held); st != 200 || !strings.HasPrefix(body, fmt.Sprint(size)+" ") {
		t.Fatalf("the held upload: %d %q", st, body)
	}
	upload(t, c, "http://cap.p2p/after", "an upload after the held one", 2<<20, false)
	upload(t, h2, "https://cap.p2p/after-h2", "an HTTP/2 upload after the held one", 2<<20, true)
}
