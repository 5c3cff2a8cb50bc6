package httpx

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// Handoff keeps a listening socket open across an in-place restart of
// the server behind it (the node's admin socket across a backup restore):
// one goroutine accepts, and hands each connection to the current view
// (Next), which the server of one incarnation serves and closes without
// closing the socket. Between incarnations a connection gets an HTTP 503
// with Retry-After instead of being refused, so a client that retries
// sees the restart as a moment of unavailability.
type Handoff struct {
	ln   net.Listener
	mu   sync.Mutex // guards cur
	cur  *handoffView
	done chan struct{} // closed when the accept loop ended
}

// NewHandoff starts accepting on ln; Close stops.
func NewHandoff(ln net.Listener) *Handoff {
	s := &Handoff{ln: ln, done: make(chan struct{})}
	go s.accept()
	return s
}

func (s *Handoff) accept() {
	defer close(s.done)
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off and go
			// on, as net/http's Serve does.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		v := s.cur
		s.mu.Unlock()
		if v == nil || !v.offer(c) {
			go unavailable(c)
		}
	}
}

// Next is the listener of the next incarnation: it gets every connection
// accepted from now until it is closed (closing it leaves the socket open).
func (s *Handoff) Next() net.Listener {
	v := &handoffView{s: s, conns: make(chan net.Conn), closed: make(chan struct{})}
	s.mu.Lock()
	s.cur = v
	s.mu.Unlock()
	return v
}

// Close closes the socket and waits for the accept loop.
func (s *Handoff) Close() {
	s.ln.Close()
	<-s.done
}

type handoffView struct {
	s      *Handoff
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

// offer hands c to a goroutine in Accept; false once the view closed.
func (v *handoffView) offer(c net.Conn) bool {
	select {
	case v.conns <- c:
		return true
	case <-v.closed:
		return false
	}
}

func (v *handoffView) Accept() (net.Conn, error) {
	select {
	case c := <-v.conns:
		return c, nil
	case <-v.closed:
		return nil, net.ErrClosed
	}
}

func (v *handoffView) Close() error {
	v.once.Do(func() {
		close(v.closed)
		v.s.mu.Lock()
		if v.s.cur == v {
			v.s.cur = nil
		}
		v.s.mu.Unlock()
	})
	return nil
}

func (v *handoffView) Addr() net.Addr { return v.s.ln.Addr() }

// Addr is the socket's address.
func (s *Handoff) Addr() net.Addr { return s.ln.Addr() }

// unavailable answers a connection that arrived between incarnations:
// it reads what the client sent (so closing does not reset the
// connection under the response), answers 503 and closes.
func unavailable(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 4096)
	for n := 0; n < 16; n++ { // up to 64 KiB of request head
		k, err := c.Read(buf)
		if err != nil || k == 0 || bytes.Contains(buf[:k], []byte("\r\n\r\n")) {
			break
		}
	}
	const body = "the node is restarting (restoring a backup); try again in a moment\n"
	_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\nConnection: close\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
}
