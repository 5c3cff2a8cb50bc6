package admin

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// A body over MaxBody is answered 413, as the edge proxy answers it for
// the admin domain, not fasthttp's default 400 "Error when parsing
// request".
func TestBodyOverLimitIs413(t *testing.T) {
	addr := serveAdmin(t, Deps{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// The head announces the size; the server answers before any body.
	if _, err := fmt.Fprintf(c, "POST /api/add-local-dns HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, MaxBody+1); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("Content-Length %d = %d, want 413", MaxBody+1, resp.StatusCode)
	}
}
