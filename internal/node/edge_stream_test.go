package node

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestEdgePassesPiecesAsTheyCome: what an upstream has sent of a response
// reaches the client while the upstream pauses, over HTTP and HTTPS, with
// a fixed length and chunked. A proxy that buffered until it had a
// buffer's worth (fasthttp's writer holds up to 4 KiB, and the head with
// it) would keep a progress line, a log tail or an event until the next
// one came.
func TestEdgePassesPiecesAsTheyCome(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	const first, total = "first piece;", 64 << 10
	more := make(chan struct{}, 1)
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fixed" {
			w.Header().Set("Content-Length", fmt.Sprint(total))
		}
		_, _ = io.WriteString(w, first)
		w.(http.Flusher).Flush()
		select { // the rest once the test has seen the first piece
		case <-more:
		case <-time.After(20 * time.Second):
		}
		_, _ = io.WriteString(w, strings.Repeat("x", total-len(first)))
	}))
	t.Cleanup(back.Close)
	_, url := tunnelServerURL(t, n, fmt.Sprintf(`{"name":"pieces","port":%d}`, back.Listener.Addr().(*net.TCPAddr).Port))
	mustJSON(t, "POST", base+"/api/add-domain", `{"domain":"pieces.p2p","hash":"`+url+`"}`, 200, nil)
	plain, secure := edgeDials(t, n, "pieces.p2p")
	dials := map[string]func() (net.Conn, error){"http": plain, "https": secure}
	for scheme, dial := range dials {
		for _, path := range []string{"/fixed", "/chunked"} {
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
			got := make([]byte, len(first))
			if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != first {
				t.Fatalf("%s %s: %q %v while the upstream pauses, want %q", scheme, path, got, err, first)
			}
			more <- struct{}{}
			rest, err := io.ReadAll(resp.Body)
			if err != nil || len(rest) != total-len(first) {
				t.Fatalf("%s %s: the rest: %d bytes, %v", scheme, path, len(rest), err)
			}
			c.Close()
		}
	}
}
