package transport

import (
	"context"
	"io"
	"sync/atomic"
	"time"
)

// Stream kinds: the first byte of every stream a node opens on a peer
// connection says which layer it is for, so the tunnels and the plugins'
// peer calls share the connection's streams without reading each
// other's. A stream of an unknown kind, or whose kind byte does not come
// within KindTimeout, is reset.
const (
	StreamTunnel byte = 1
	StreamPlugin byte = 2
)

// KindTimeout bounds the wait for a stream's kind byte.
const KindTimeout = 10 * time.Second

// Mux dispatches the streams of a Mesh by kind. Views (For) are Meshes
// for one kind: their HandleStreams gets only streams of that kind (the
// kind byte already read), and streams opened through their Conn start
// with the kind byte.
type Mux struct {
	mesh     Mesh
	handlers [256]atomic.Pointer[func(c Conn, s Stream)]
}

// NewMux takes over m's stream handler.
func NewMux(m Mesh) *Mux {
	x := &Mux{mesh: m}
	m.HandleStreams(x.serve)
	return x
}

func (x *Mux) serve(c Conn, s Stream) {
	_ = s.SetReadDeadline(time.Now().Add(KindTimeout))
	var kind [1]byte
	if _, err := io.ReadFull(s, kind[:]); err != nil {
		s.Abort()
		return
	}
	_ = s.SetReadDeadline(time.Time{})
	h := x.handlers[kind[0]].Load()
	if h == nil {
		s.Abort()
		return
	}
	(*h)(c, s)
}

// For is the Mesh of one stream kind.
func (x *Mux) For(kind byte) Mesh { return &muxView{x: x, kind: kind} }

type muxView struct {
	x    *Mux
	kind byte
}

func (v *muxView) Conn(peerID string) (Conn, bool) {
	c, ok := v.x.mesh.Conn(peerID)
	if !ok {
		return nil, false
	}
	return &kindConn{Conn: c, kind: v.kind}, true
}

func (v *muxView) Providers(id string) []string { return v.x.mesh.Providers(id) }
func (v *muxView) Announce(ids []string)        { v.x.mesh.Announce(ids) }
func (v *muxView) HandleDatagrams(h func(c Conn, b []byte)) {
	v.x.mesh.HandleDatagrams(h)
}

func (v *muxView) HandleStreams(h func(c Conn, s Stream)) {
	if h == nil {
		v.x.handlers[v.kind].Store(nil)
		return
	}
	v.x.handlers[v.kind].Store(&h)
}

// kindConn writes its kind byte at the start of every stream it opens.
type kindConn struct {
	Conn
	kind byte
}

func (c *kindConn) OpenStream(ctx context.Context) (Stream, error) {
	s, err := c.Conn.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.Write([]byte{c.kind}); err != nil {
		s.Abort()
		return nil, err
	}
	return s, nil
}
