package proxy

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestBodyBudget: heads that declare large bodies take their size from
// the budget before anything is allocated; one that does not fit is a
// 503 with Retry-After at once; a request that completes, and one whose
// client goes away mid-body, give their share back; a body over the
// maximum is still 413.
func TestBodyBudget(t *testing.T) {
	s := New(Deps{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", BodyBudget: 3 * BigBody})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	addr, _ := s.Addrs()
	head := func(n int) string {
		return fmt.Sprintf("POST /up HTTP/1.1\r\nHost: nowhere.p2p\r\nContent-Length: %d\r\n\r\n", n)
	}
	open := func(n int) net.Conn {
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write([]byte(head(n))); err != nil {
			t.Fatal(err)
		}
		return c
	}
	status := func(c net.Conn) (int, http.Header) {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
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

	a := open(2 * BigBody) // waits for its body, holding 2 of 3
	waitLeft(BigBody)
	b := open(2 * BigBody) // does not fit
	if st, h := status(b); st != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" {
		t.Fatalf("over budget: %d Retry-After %q, want 503 and 1", st, h.Get("Retry-After"))
	}
	c := open(BigBody) // fits beside a
	waitLeft(0)
	if _, err := c.Write(make([]byte, BigBody)); err != nil {
		t.Fatal(err)
	}
	if st, _ := status(c); st != http.StatusNotFound { // no such domain: the handler ran
		t.Fatalf("a body within budget: %d, want 404", st)
	}
	waitLeft(BigBody)
	a.Close() // gone mid-body: its share comes back
	waitLeft(3 * BigBody)
	d := open(3 * BigBody) // the whole budget again
	waitLeft(0)
	d.Close()
	waitLeft(3 * BigBody)

	e := open(MaxBodyBytes + 1)
	if st, _ := status(e); st != http.StatusRequestEntityTooLarge {
		t.Fatalf("over the maximum: %d, want 413", st)
	}
	if refused := s.Counters().BodyRefused; refused != 1 {
		t.Fatalf("%d refused, want 1", refused)
	}
	// Small bodies never touch the budget.
	f := open(5)
	if _, err := f.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if st, _ := status(f); st != http.StatusNotFound {
		t.Fatalf("a small body: %d", st)
	}
	s.budget.mu.Lock()
	held := len(s.budget.held)
	s.budget.mu.Unlock()
	if held != 0 {
		t.Fatalf("%d reservations left", held)
	}
}

// TestBodyTime: a body may take longer than ReadTimeout, as long as it
// comes at MinBodyRate or faster; a slower one is still cut with 408.
func TestBodyTime(t *testing.T) {
	const readTimeout = 300 * time.Millisecond
	s := New(Deps{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", ReadTimeout: readTimeout})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	addr, _ := s.Addrs()
	const size = MinBodyRate // ReadTimeout + 1 s to send it
	send := func(chunks int, pause time.Duration) int {
		t.Helper()
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /up HTTP/1.1\r\nHost: nowhere.p2p\r\nContent-Length: %d\r\n\r\n", size)
		for i := 0; i < chunks; i++ {
			time.Sleep(pause) // the client's pace, not a wait for a result
			if _, err := c.Write(make([]byte, size/chunks)); err != nil {
				break // cut: the answer says why
			}
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// 64 KiB over 0.6 s: twice ReadTimeout, within the rate.
	if st := send(4, 150*time.Millisecond); st != http.StatusNotFound {
		t.Fatalf("a body slower than ReadTimeout but above the rate: %d, want 404 (no such domain)", st)
	}
	// 64 KiB at 16 KiB/s: cut once ReadTimeout + 1 s has passed.
	if st := send(8, 500*time.Millisecond); st != http.StatusRequestTimeout {
		t.Fatalf("a body below the rate: %d, want 408", st)
	}
}
