package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// heldPair is a loopback TCP pair, the server side wrapped as the plain
// HTTP listener wraps it.
func heldPair(t *testing.T) (*movingDeadlines, net.Conn) {
	t.Helper()
	client, server := tcpPair(t)
	mc := &movingDeadlines{Conn: server, lazy: true}
	mc.wr.every.Store(int64(5 * time.Second))
	return mc, client
}

// readN reads n bytes from c within 5 s.
func readN(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read %d bytes: %v (got %q)", n, err, b)
	}
	return string(b)
}

// A held head goes out with the next write, in order; the head alone
// goes out once the writer blocks (here: waits for the client, who
// waits for the head); Close writes a head still held; and each answer
// arms the hold anew.
func TestHeldHead(t *testing.T) {
	mc, cl := heldPair(t)
	for i := range 3 {
		mc.holdHead()
		if n, err := mc.Write([]byte("HEAD")); n != 4 || err != nil {
			t.Fatalf("held write: %d %v", n, err)
		}
		if n, err := mc.Write([]byte("body")); n != 4 || err != nil {
			t.Fatalf("write after the head: %d %v, want 4 (the body's bytes only)", n, err)
		}
		if got := readN(t, cl, 8); got != "HEADbody" {
			t.Fatalf("answer %d: %q", i, got)
		}
	}
	// Nothing written after the head: the writer blocks, the head goes.
	mc.holdHead()
	if _, err := mc.Write([]byte("LONE")); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, cl, 4); got != "LONE" {
		t.Fatalf("a lone held head: %q", got)
	}
	// Not armed: written at once, as ever.
	if _, err := mc.Write([]byte("plain")); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, cl, 5); got != "plain" {
		t.Fatalf("an unheld write: %q", got)
	}
	// A head larger than the hold bound is written at once.
	big := strings.Repeat("h", maxHeldHead+1)
	mc.holdHead()
	if _, err := mc.Write([]byte(big)); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, cl, len(big)); got != big {
		t.Fatal("a large head was not written whole")
	}
	if _, err := mc.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, cl, 5); got != "after" {
		t.Fatalf("after a large head: %q", got)
	}
	// Close with a head held writes it first.
	mc.holdHead()
	if _, err := mc.Write([]byte("LAST")); err != nil {
		t.Fatal(err)
	}
	if err := mc.Close(); err != nil {
		t.Fatal(err)
	}
	_ = cl.SetReadDeadline(time.Now().Add(5 * time.Second))
	rest, err := io.ReadAll(cl)
	if err != nil || string(rest) != "LAST" {
		t.Fatalf("after Close: %q %v, want \"LAST\" and EOF", rest, err)
	}
}

// A held head whose write fails (the client is gone) fails the next
// Write with that error, once; writes after it go on as usual.
func TestHeldHeadWriteError(t *testing.T) {
	mc, cl := heldPair(t)
	cl.Close()
	// Writes to a peer that closed fail after a first one that the
	// kernel took (the peer's reset comes back); write until one does.
	var failed bool
	deadline := time.Now().Add(5 * time.Second)
	for !failed && time.Now().Before(deadline) {
		mc.holdHead()
		if _, err := mc.Write([]byte("HEAD")); err != nil {
			t.Fatalf("a held write failed at once: %v", err)
		}
		_, err := mc.Write(bytes.Repeat([]byte("b"), 1<<10))
		failed = err != nil
		if failed && errors.Is(err, net.ErrClosed) {
			t.Fatalf("error %v: the connection was closed here, not by the peer", err)
		}
	}
	if !failed {
		t.Fatal("no write failed after the peer closed")
	}
	// The lone head's goroutine records its error for the next Write.
	mc.holdHead()
	if _, err := mc.Write([]byte("HEAD")); err != nil {
		t.Fatal(err)
	}
	h := mc.head.Load()
	for {
		h.mu.Lock()
		pending, err := h.pending, h.err
		h.mu.Unlock()
		if !pending {
			if err == nil {
				t.Fatal("the lone head's write to a closed peer did not fail")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lone head was never written")
		}
		time.Sleep(time.Millisecond) // polling the goroutine's state
	}
	if _, err := mc.Write([]byte("x")); err == nil {
		t.Fatal("the failed write of a lone head was not reported")
	}
	if h.active.Load() {
		t.Fatal("the hold is still active once its error was reported")
	}
}

// Holding a head and writing it with the next write allocates nothing
// (outside race builds, where buffers handed to system calls escape).
func TestHeldHeadAllocates(t *testing.T) {
	mc, cl := heldPair(t)
	go func() { _, _ = io.Copy(io.Discard, cl) }()
	head, body := []byte("HEAD"), []byte("body")
	n := testing.AllocsPerRun(200, func() {
		mc.holdHead()
		if _, err := mc.Write(head); err != nil {
			t.Fatal(err)
		}
		if _, err := mc.Write(body); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 && !raceBuild {
		t.Fatalf("%v allocations per held answer", n)
	}
}
