package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// TestEdgePassesPiecesAsTheyCome: what an upstream has sent of a response
// reaches the client while the upstream pauses, over HTTP and HTTPS, with
// a fixed length and chunked, and a fixed-length head sent alone. A proxy
// that buffered until it had a buffer's worth (fasthttp's writer holds up
// to 4 KiB, and the head with it) would keep a progress line, a log tail
// or an event until the next one came; one that held a head for its
// body's first piece (the edge does, while the piece comes at once)
// would keep the head of a download whose body comes later.
func TestEdgePassesPiecesAsTheyCome(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	const first, total = "first piece;", 64 << 10
	more := make(chan struct{}, 1)
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/chunked" {
			w.Header().Set("Content-Length", fmt.Sprint(total))
		}
		sent := 0
		if r.URL.Path != "/head" {
			_, _ = io.WriteString(w, first)
			sent = len(first)
		}
		w.(http.Flusher).Flush()
		select { // the rest once the test has seen the first piece
		case <-more:
		case <-time.After(20 * time.Second):
		}
		_, _ = io.WriteString(w, strings.Repeat("x", total-sent))
	}))
	t.Cleanup(back.Close)
	_, url := tunnelServerURL(t, n, fmt.Sprintf(`{"name":"pieces","port":%d}`, back.Listener.Addr().(*net.TCPAddr).Port))
	mustJSON(t, "POST", base+"/api/add-domain", `{"domain":"pieces.p2p","hash":"`+url+`"}`, 200, nil)
	plain, secure := edgeDials(t, n, "pieces.p2p")
	dials := map[string]func() (net.Conn, error){"http": plain, "https": secure}
	for scheme, dial := range dials {
		for _, path := range []string{"/fixed", "/chunked", "/head"} {
			c, err := dial()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: pieces.p2p\r\n\r\n", path)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("%s %s: no head while the upstream pauses: %v", scheme, path, err)
			}
			sent := 0
			if path != "/head" {
				got := make([]byte, len(first))
				if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != first {
					t.Fatalf("%s %s: %q %v while the upstream pauses, want %q", scheme, path, got, err, first)
				}
				sent = len(first)
			}
			more <- struct{}{}
			rest, err := io.ReadAll(resp.Body)
			if err != nil || len(rest) != total-sent {
				t.Fatalf("%s %s: the rest: %d bytes, %v", scheme, path, len(rest), err)
			}
			c.Close()
		}
	}
}

// TestEdgeUploadAnsweredEarly: an upstream that answers an upload before
// reading its body (401 for a missing token, 413 for a body too large)
// and closes: the client gets that answer, not a 502, the edge stops
// reading the body and closes the client's connection after the answer.
// On the same node (A's edge dials the backend) and through a tunnel
// (B's edge, over QUIC to A). Go's net/http server is such an upstream:
// past 256 KiB of unread body it closes after answering.
func TestEdgeUploadAnsweredEarly(t *testing.T) {
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/guarded":
			http.Error(w, "token required", http.StatusUnauthorized)
		case "/small":
			http.Error(w, "at most 1 MiB here", http.StatusRequestEntityTooLarge)
		default:
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "%d", n)
		}
	}))
	t.Cleanup(back.Close)
	port := back.Listener.Addr().(*net.TCPAddr).Port

	nodes := newNetwork(t, 2)
	a, b := nodes[0], nodes[1]
	tunnelServerURL(t, a, fmt.Sprintf(`{"name":"early","port":%d,"domain":"early.p2p"}`, port))
	for _, n := range []*Node{a, b} {
		httpAddr, _ := n.EdgeAddrs()
		c := edgeClient(httpAddr, nil)
		testutil.Eventually(t, 20*time.Second, func() error {
			if cs := consensusOn(t, n, "early.p2p"); cs.Status != "resolved" {
				return fmt.Errorf("early.p2p: %+v", cs)
			}
			return nil
		})
		waitServed(t, c, "http://early.p2p/")
	}
	for _, tc := range []struct {
		name string
		n    *Node
	}{{"same node", a}, {"through a tunnel", b}} {
		t.Run(tc.name, func(t *testing.T) {
			httpAddr, _ := tc.n.EdgeAddrs()
			plain, secure := edgeDials(t, tc.n, "early.p2p")
			earlyAnswer(t, plain, "/guarded", false, 401, "token required")
			earlyAnswer(t, plain, "/small", false, 413, "at most 1 MiB here")
			earlyAnswer(t, plain, "/guarded", true, 401, "token required")
			earlyAnswer(t, secure, "/guarded", false, 401, "token required")
			// The upstream that reads it all still gets it all.
			resp, err := edgeClient(httpAddr, nil).Post("http://early.p2p/count", "application/octet-stream", io.LimitReader(zeros{}, 3<<20))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(got) != "3145728" {
				t.Fatalf("after early answers: %d %q, want 200 \"3145728\"", resp.StatusCode, got)
			}
		})
	}
}

// earlyAnswer sends a 64 MiB upload (chunked: pieces of 64 KiB) to path
// on a connection from dial for as long as the edge takes it and checks
// the answer that comes back meanwhile, then that the edge closes the
// connection after it.
func earlyAnswer(t *testing.T, dial func() (net.Conn, error), path string, chunked bool, status int, body string) {
	t.Helper()
	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const size = 64 << 20
	head := fmt.Sprintf("Content-Length: %d", size)
	if chunked {
		head = "Transfer-Encoding: chunked"
	}
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: early.p2p\r\n%s\r\n\r\n", path, head)
	sending := make(chan int64, 1)
	go func() {
		piece := make([]byte, 64<<10)
		if chunked {
			piece = append([]byte(fmt.Sprintf("%x\r\n", 64<<10)), append(make([]byte, 64<<10), "\r\n"...)...)
		}
		var n int64
		for n < size {
			k, err := c.Write(piece)
			n += int64(k)
			if err != nil {
				break
			}
		}
		sending <- n
	}()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: no answer while the body was going: %v", path, err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != status || strings.TrimSpace(string(got)) != body {
		t.Fatalf("%s: %d %q, want %d %q", path, resp.StatusCode, got, status, body)
	}
	if !resp.Close {
		t.Errorf("%s: the answer keeps the connection open; the rest of the body is unread", path)
	}
	// The edge closes: reading ends (EOF, or a reset if body bytes were
	// still arriving) well before the read deadline.
	var ne net.Error
	if _, err := br.ReadByte(); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Errorf("%s: the connection still open after the answer: %v", path, err)
	}
	c.Close()
	if n := <-sending; n >= size {
		t.Errorf("%s: the edge read the whole %d bytes it was not going to use", path, n)
	}
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}
