package node

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// sharedListener keeps the admin socket open across an in-place restart
// (a backup restore): one goroutine accepts, and hands each connection to
// the current view, which the admin server of one incarnation serves and
// closes without closing the socket. Between incarnations a connection
// gets a 503 with Retry-After instead of being refused.
type sharedListener struct {
	ln   net.Listener
	mu   sync.Mutex // guards cur
	cur  *listenerView
	done chan struct{} // closed when the accept loop ended
}

func shareListener(ln net.Listener) *sharedListener {
	s := &sharedListener{ln: ln, done: make(chan struct{})}
	go s.accept()
	return s
}

func (s *sharedListener) accept() {
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

// view is a listener for the next incarnation.
func (s *sharedListener) view() net.Listener {
	v := &listenerView{s: s, conns: make(chan net.Conn), closed: make(chan struct{})}
	s.mu.Lock()
	s.cur = v
	s.mu.Unlock()
	return v
}

// close closes the socket and waits for the accept loop.
func (s *sharedListener) close() {
	s.ln.Close()
	<-s.done
}

type listenerView struct {
	s      *sharedListener
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

// offer hands c to a goroutine in Accept; false once the view closed.
func (v *listenerView) offer(c net.Conn) bool {
	select {
	case v.conns <- c:
		return true
	case <-v.closed:
		return false
	}
}

func (v *listenerView) Accept() (net.Conn, error) {
	select {
	case c := <-v.conns:
		return c, nil
	case <-v.closed:
		return nil, net.ErrClosed
	}
}

func (v *listenerView) Close() error {
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

func (v *listenerView) Addr() net.Addr { return v.s.ln.Addr() }

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
