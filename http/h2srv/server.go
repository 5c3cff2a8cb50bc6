package h2srv

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Config sets a Server's limits. Zero fields take the defaults named.
type Config struct {
	// MaxConcurrentStreams is advertised in SETTINGS and bounds the
	// handlers running at once on a connection (default 128).
	MaxConcurrentStreams uint32
	// MaxHeaderListSize is advertised as SETTINGS_MAX_HEADER_LIST_SIZE
	// and is the Framer's limit (default 1 MiB).
	MaxHeaderListSize uint32
	// MaxReadFrameSize is advertised as SETTINGS_MAX_FRAME_SIZE; frames
	// over it are a FRAME_SIZE_ERROR (default 16 KiB).
	MaxReadFrameSize uint32
	// StreamWindow and ConnWindow are the receive windows for request
	// bodies (default 1 MiB each).
	StreamWindow, ConnWindow uint32
	// IdleTimeout: a connection with no stream open for this long is
	// sent GOAWAY NO_ERROR and closed (0: never).
	IdleTimeout time.Duration
	// PrefaceTimeout bounds the wait for the client preface and its
	// first SETTINGS (default 10 s).
	PrefaceTimeout time.Duration
	// CountError is called with a short kind for every protocol error
	// the server sees (may be nil).
	CountError func(kind string)
	// ConnError is called once for a connection the server ends with an
	// error (a GOAWAY with a code other than NO_ERROR, or a bad, partial
	// or missing preface; not a connection its client closed before
	// sending anything: closedUnused) (may be nil).
	ConnError func(err error)
	// Log receives debug logs and recovered handler panics (may be nil).
	Log *slog.Logger
}

func (c *Config) setDefaults() {
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = 128
	}
	if c.MaxHeaderListSize == 0 {
		c.MaxHeaderListSize = 1 << 20
	}
	if c.MaxReadFrameSize < minMaxFrameSize || c.MaxReadFrameSize > maxMaxFrameSize {
		c.MaxReadFrameSize = minMaxFrameSize
	}
	if c.StreamWindow == 0 {
		c.StreamWindow = 1 << 20
	}
	if c.ConnWindow == 0 {
		c.ConnWindow = 1 << 20
	}
	if c.StreamWindow > maxWindow {
		c.StreamWindow = maxWindow
	}
	if c.ConnWindow > maxWindow {
		c.ConnWindow = maxWindow
	}
	if c.ConnWindow < initialWindow {
		c.ConnWindow = initialWindow
	}
	if c.PrefaceTimeout == 0 {
		c.PrefaceTimeout = 10 * time.Second
	}
}

// Server serves HTTP/2 connections handed to ServeConn.
type Server struct {
	cfg Config

	mu       sync.Mutex
	conns    map[*conn]struct{}
	shutting bool
	done     chan struct{} // closed when conns empties during Shutdown

	writes   atomic.Int64 // Writes to connections, for the benchmarks
	pools    []workerPool
	nextPool atomic.Uint32
}

// New returns a Server with cfg's limits (defaults filled in).
func New(cfg Config) *Server {
	cfg.setDefaults()
	return &Server{cfg: cfg, conns: make(map[*conn]struct{}), pools: newPools()}
}

// ServeConn serves c until the client or the server ends it; it closes c
// before returning. base is the context of every request on c (a stream
// the client resets gets its child context cancelled at the reset).
func (s *Server) ServeConn(base context.Context, c net.Conn, h http.Handler) error {
	sc := newConn(s, c, h, base)
	s.mu.Lock()
	if s.shutting {
		s.mu.Unlock()
		_ = c.Close()
		return http.ErrServerClosed
	}
	s.conns[sc] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, sc)
		if s.shutting && len(s.conns) == 0 && s.done != nil {
			close(s.done)
			s.done = nil
		}
		s.mu.Unlock()
	}()
	return sc.serve()
}

// Shutdown sends GOAWAY (NO_ERROR, the last stream id) on every
// connection, lets the streams in flight finish until ctx ends, then
// closes what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutting = true
	if len(s.conns) == 0 {
		s.mu.Unlock()
		s.closePools()
		return nil
	}
	done := make(chan struct{})
	s.done = done
	conns := s.list()
	s.mu.Unlock()
	for _, c := range conns {
		c.shutdown()
	}
	select {
	case <-done:
		s.closePools()
		return nil
	case <-ctx.Done():
		_ = s.Close()
		return ctx.Err()
	}
}

// Close closes every connection now.
func (s *Server) Close() error {
	s.mu.Lock()
	s.shutting = true
	conns := s.list()
	s.mu.Unlock()
	for _, c := range conns {
		c.closeNow()
	}
	s.closePools()
	return nil
}

func (s *Server) closePools() {
	for i := range s.pools {
		s.pools[i].close()
	}
}

// Open reports the connections being served.
func (s *Server) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) list() []*conn {
	l := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		l = append(l, c)
	}
	return l
}

func (s *Server) countError(kind string) {
	if s.cfg.CountError != nil {
		s.cfg.CountError(kind)
	}
}
