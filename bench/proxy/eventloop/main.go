// Command eventloop is the floor of an event-loop reverse proxy in Go:
// gnet's epoll loops (one per core), each client connection paired with
// one kept-alive upstream connection registered on the same loop, so a
// request costs a read and a write on each side and no goroutine switch,
// as in nginx. It forwards a request head with X-Forwarded-For/-Proto
// added and a response framed by Content-Length, nothing else (no
// bodies, no chunked responses, no access log, no routing): enough for
// bench/proxy/compare.sh's GET requests and nothing more. It is its own
// module so that the node's go.mod does not carry gnet for a benchmark.
package main

import (
	"bytes"
	"context"
	"flag"
	"log"
	"net"
	"strconv"

	"github.com/panjf2000/gnet/v2"
)

// client is a client connection's state: its upstream once registered,
// and the requests that arrived before it was.
type client struct {
	up      gnet.Conn
	pending [][]byte
}

// upstream is an upstream connection's state: the client it answers.
type upstream struct{ client gnet.Conn }

type proxy struct {
	gnet.BuiltinEventEngine
	backend net.Addr
}

var (
	endOfHead     = []byte("\r\n\r\n")
	contentLength = [][]byte{[]byte("\r\nContent-Length: "), []byte("\r\ncontent-length: ")}
	forwarded     = []byte("X-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\n\r\n")
)

func (p *proxy) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if cl, ok := c.Context().(gnet.Conn); ok { // an upstream we registered
		st := cl.Context().(*client)
		st.up = c
		c.SetContext(&upstream{client: cl})
		for _, req := range st.pending {
			_, _ = c.Write(req)
		}
		st.pending = nil
		return nil, gnet.None
	}
	c.SetContext(&client{})
	return nil, gnet.None
}

func (p *proxy) OnClose(c gnet.Conn, _ error) gnet.Action {
	switch st := c.Context().(type) {
	case *client:
		if st.up != nil {
			_ = st.up.Close()
		}
	case *upstream:
		_ = st.client.Close()
	}
	return gnet.None
}

func (p *proxy) OnTraffic(c gnet.Conn) gnet.Action {
	buf, _ := c.Peek(-1)
	switch st := c.Context().(type) {
	case *client:
		for {
			i := bytes.Index(buf, endOfHead)
			if i < 0 {
				return gnet.None
			}
			req := append(append(make([]byte, 0, i+2+len(forwarded)), buf[:i+2]...), forwarded...)
			if st.up != nil {
				_, _ = st.up.Write(req)
			} else {
				st.pending = append(st.pending, req)
				if len(st.pending) == 1 {
					if _, err := c.EventLoop().Register(gnet.NewContext(context.Background(), c), p.backend); err != nil {
						return gnet.Close
					}
				}
			}
			_, _ = c.Discard(i + 4)
			buf = buf[i+4:]
		}
	case *upstream:
		for {
			i := bytes.Index(buf, endOfHead)
			if i < 0 {
				return gnet.None
			}
			n := 0
			for _, name := range contentLength {
				if j := bytes.Index(buf[:i+2], name); j >= 0 {
					k := j + len(name)
					e := bytes.IndexByte(buf[k:], '\r')
					if e < 0 {
						return gnet.Close
					}
					n, _ = strconv.Atoi(string(buf[k : k+e]))
					break
				}
			}
			total := i + 4 + n
			if len(buf) < total {
				return gnet.None
			}
			_, _ = st.client.Write(buf[:total])
			_, _ = c.Discard(total)
			buf = buf[total:]
		}
	}
	return gnet.None
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	backend := flag.String("backend", "", "backend host:port")
	flag.Parse()
	addr, err := net.ResolveTCPAddr("tcp", *backend)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(gnet.Run(&proxy{backend: addr}, "tcp://"+*listen, gnet.WithMulticore(true)))
}
