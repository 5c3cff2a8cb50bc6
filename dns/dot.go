package dns

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
)

// ServeTLS adds a DNS-over-TLS listener (RFC 7858) on addr with cfg (the
// node gives it a certificate from its CA): the same answers as plain
// TCP, through the same handler and accept rules. It returns once the
// listener serves; Shutdown stops it. Called at most once, after Start.
//
// Idle connections are closed after 10 s, as on TCP (RFC 7766 §6.2.3
// leaves the value to the server; RFC 7858 §3.4 asks for connection
// reuse, which keep-alive within that window gives).
func (s *Server) ServeTLS(addr string, cfg *tls.Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started.Load() || s.stopped.Load() {
		return errors.New("dns over tls: the dns server is not running")
	}
	if s.dot != nil {
		return errors.New("dns over tls: already serving")
	}
	cfg = cfg.Clone()
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"dot"} // RFC 7858 ALPN id (IANA)
	}
	raw, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("dns over tls listen %s: %w", addr, err)
	}
	// The limits wrap the TCP connections under TLS: the write deadline
	// covers the handshake's writes and every record.
	sl := newStreamListener(raw, &s.cfg)
	ln := tls.NewListener(sl, cfg)
	srv := newStreamServer(s, ln, "tls")
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.serve(); err != nil && !s.stopped.Load() {
			s.log.Error("dns over tls stopped", "err", err)
		}
	}()
	s.dot = srv
	s.dotListener = sl
	s.dotAddr = ln.Addr().String()
	s.log.Info("dns over tls started", "addr", s.dotAddr)
	return nil
}

// TLSAddr is the DNS-over-TLS address ("" when not serving).
func (s *Server) TLSAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dotAddr
}
