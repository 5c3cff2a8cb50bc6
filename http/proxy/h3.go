package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"golang.org/x/time/rate"

	"peerdns/internal/udpgro"
)

// HTTP/3 (quic-go's http3) on the HTTPS address's UDP port, with the
// same certificates (by SNI), routes and handler as HTTP/2 (h2.go), the
// same stream limit (MaxH2Streams) and header limit (MaxHeaderBytes).
// Its handshakes are counted with the TCP ones (EdgeMetrics'
// TLSHandshakes and TLSNoCertificate).
// HTTP/1.1 and HTTP/2 answers on TLS carry Alt-Svc: h3=":port" so
// clients move to it. An upstream's own Alt-Svc is not passed on, on
// any protocol (with HTTP/3 off too): it names the upstream's ports,
// behind the tunnel, and a client that followed it would leave the edge
// (an h3=":443" from a site served on 7743). Browsers do not, for the node's own root: Chromium
// speaks QUIC only to certificates under a publicly trusted root
// (ERR_QUIC_CERT_ROOT_NOT_KNOWN) unless an origin is forced onto it, and
// Firefox turns HTTP/3 off when a user added roots; they stay on HTTP/2
// (http/admin/panel's browser test loads the panel both ways).
//
// The socket is read through internal/udpgro: datagrams the kernel
// merged (UDP_GRO) are handed to quic-go packet by packet.
//
// 0-RTT is off (quic.Config.Allow0RTT false): a client's early data
// could be replayed by anyone on the path, and a replayed POST would run
// twice. Refusing 0-RTT for every method is simpler than telling
// idempotent requests apart inside the HTTP/3 layer, and costs a
// resuming client one round trip. Amplification before address
// validation is limited as quic-go sets it (three times what the client
// sent, RFC 9000 §8).
//
// Streams at once: QUIC gives a stream's credit back (MaxIncomingStreams)
// as soon as it is closed both ways, which a client that resets its
// streams does before the edge's handler has seen the reset and let go
// of its upstream request. So each connection also holds MaxH2Streams
// upstream slots (h3Slots): a stream to a tunnel upstream takes one
// before it goes on, and waits for it while its client has not left (a
// stream reset while it waits is answered 499 and counted, never going
// upstream). An HTTP/3 connection, like an HTTP/2 one, has at most
// MaxH2Streams requests at its upstreams at once, however fast it
// resets streams, as the edge counts them: an upstream sees a reset
// request end a little after the edge let go of it (the reset crosses
// a tunnel, then a connection's reset is read), so for that moment it
// may count a few more.
//
// Handshakes: a QUIC server keeps state and signs a handshake for every
// Initial packet, whose source address may be forged; quic-go asks for
// nothing more by default. The edge lets new connections from addresses
// not yet validated come at H3HandshakeRate a second (bursts of
// H3HandshakeBurst); past that each is sent a Retry (RFC 9000 §8.1.2),
// which costs the edge no state and a real client one round trip, and
// which a forged address never answers. A handshake cost the edge about
// 0.65 ms of CPU (2 vCPU, quic-go's client dialing in a loop:
// bench/README.md), so the default rate is about a twelfth of a core;
// past it, a forged Initial costs a Retry packet and nothing else.
// Clients at real addresses that answer their Retry still get their
// handshakes (as SYN cookies do for TCP). Counted: the Retry packets
// sent (Counters.H3Retries, /metrics peerdns_edge_http3_retries_total;
// a client whose first flight spans two Initial packets, as a
// post-quantum key share does, gets one for each). The rate is the
// edge's, not a source's: a source address is what cannot be trusted
// before it is validated.
//
// Connections: HTTP/3's count in the edge's cap with the TCP ones, and in
// their address's share (connlimit.go), from the end of their handshake
// (which proves the address, as a TCP connection's does) until they
// close; one over either is closed at once with H3_EXCESSIVE_LOAD
// (admitQUIC), and its client goes on over TCP. Counted: over the share with the TCP ones
// (Counters.ConnsOverShare), at the cap Counters.H3AtCap.
//
// A UDP port that cannot be bound (taken by another program) leaves the
// edge without HTTP/3, logged, and without Alt-Svc: the TCP edge still
// starts. Deps.NoHTTP3 turns it off.

// Receive windows: a request body the edge has not yet passed upstream
// waits in quic-go's buffers, up to the window the edge gave its client.
// quic-go grows a window while the data is read quickly, up to 6 MB a
// stream and 15 MB a connection by default: a client that first sends to
// an upstream that reads fast, then to one that stops, would have the
// edge hold 15 MB for it, 60 GB at the default cap of 4,096 connections.
// The edge gives HTTP/3 what it gives HTTP/2 (newH2, h2.go): at most
// H2Window unread a stream and a connection, 4 GB at that cap; a
// stream's first window is quic-go's (512 KiB). An upload at 1 MiB in
// flight runs at 80 Mbit/s over a 100 ms round trip, as it does over
// HTTP/2.
const H2Window = 1 << 20

// h3QUICConfig is the edge's QUIC configuration for HTTP/3: no 0-RTT,
// MaxH2Streams request streams, receive windows of at most H2Window,
// idle connections closed after idle, kept alive meanwhile.
//
// Keep-alive: QUIC closes a connection on which nothing came for its
// idle timeout, the smaller of the edge's and the client's (quic-go's
// is 30 s), whatever requests are open on it. A long poll (UpstreamTimeout
// waits 60 s for an answer, as over HTTP/1.1 and HTTP/2) sends nothing
// while it waits, so one held 30 s was cut by a client that sends no
// keep-alive of its own (a quic-go client given a quic.Config without
// KeepAlivePeriod). The edge sends a PING once nothing came for half
// the idle timeout (quic-go takes the smaller of KeepAlivePeriod and
// that). It keeps idle connections no longer: those with no stream
// open are closed by http3's idle timer at IdleTimeout (http3.Server's,
// which PINGs do not reset), those with streams and no request by
// watchH3. The cost is a PING and its ACK each half idle timeout on a
// connection that is quiet, up to IdleTimeout after its last request.
func h3QUICConfig(idle time.Duration) *quic.Config {
	return &quic.Config{
		Allow0RTT:                      false,
		MaxIncomingStreams:             MaxH2Streams,
		MaxIdleTimeout:                 idle,
		KeepAlivePeriod:                idle / 2,
		InitialStreamReceiveWindow:     512 << 10,
		MaxStreamReceiveWindow:         H2Window,
		InitialConnectionReceiveWindow: H2Window,
		MaxConnectionReceiveWindow:     H2Window,
	}
}

// h3State is the Server's HTTP/3 state.
type h3State struct {
	h3        *http3.Server
	h3pc      net.PacketConn
	h3tr      *quic.Transport
	h3ln      *quic.Listener
	h3open    atomic.Int64
	h3retries atomic.Int64 // Retry packets sent
	h3stuck   atomic.Int64 // connections watchH3 closed
	h3done    chan struct{}
}

// Defaults of the HTTP/3 handshake rate (Deps.H3HandshakeRate and
// H3HandshakeBurst): new connections a second from unvalidated addresses
// before Retry is asked, and the burst over it.
const (
	H3HandshakeRate  = 128
	H3HandshakeBurst = 256
)

// needsRetry is the transport's VerifySourceAddress: a Retry (true) once
// lim is spent, counted.
func (s *Server) needsRetry(lim *rate.Limiter) func(net.Addr) bool {
	return func(net.Addr) bool {
		if lim.Allow() {
			return false
		}
		s.h3retries.Add(1)
		return true
	}
}

// startH3 listens on tcpAddr's UDP twin and serves HTTP/3 on it.
func (s *Server) startH3(tcpAddr net.Addr) error {
	if s.d.NoHTTP3 {
		return nil
	}
	ta, ok := tcpAddr.(*net.TCPAddr)
	if !ok {
		return fmt.Errorf("edge http3: %v is not a TCP address", tcpAddr)
	}
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: ta.IP, Port: ta.Port, Zone: ta.Zone})
	if err != nil {
		s.d.Log.Warn("edge http3 not started: its UDP port is taken", "addr", ta.String(), "err", err)
		return nil
	}
	s.h3pc = pc
	s.h3 = &http3.Server{
		Handler:        s.h2handler,
		TLSConfig:      http3.ConfigureTLSConfig(&tls.Config{GetCertificate: s.certificate, VerifyConnection: s.verifyConnection, MinVersion: tls.VersionTLS13}),
		MaxHeaderBytes: 2 * MaxHeaderBytes, // route's own limit is MaxHeaderBytes (h2count.go)
		IdleTimeout:    s.d.IdleTimeout,
		QUICConfig:     h3QUICConfig(s.d.IdleTimeout),
		ConnContext: func(ctx context.Context, c *quic.Conn) context.Context {
			slot := s.slots.admitQUIC(c.RemoteAddr())
			if slot == nil {
				// http3 then fails to open its control stream and
				// drops the connection.
				_ = c.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeExcessiveLoad), "too many connections")
				return ctx
			}
			s.h3open.Add(1)
			hc := &h3Conn{slots: make(h3Slots, MaxH2Streams)}
			hc.last.Store(time.Now().UnixNano())
			go s.watchH3(c, hc, slot)
			return context.WithValue(h2Context(ctx), h3ConnKey{}, hc)
		},
	}
	s.h3tr = &quic.Transport{
		Conn:                udpgro.Wrap(pc),
		VerifySourceAddress: s.needsRetry(rate.NewLimiter(rate.Limit(s.d.H3HandshakeRate), s.d.H3HandshakeBurst)),
	}
	// Listen, not ListenEarly: a connection is handed over (and takes
	// its place in the cap and its address's share, ConnContext) once
	// its handshake has finished, which proves its address. An early
	// one is handed over on its first Initial, whose address anyone
	// may forge: a stream of them sent from another's address would
	// fill that address's share and refuse its own connections, TCP
	// ones included. Without 0-RTT nothing comes early anyway.
	ln, err := s.h3tr.Listen(s.h3.TLSConfig, s.h3.QUICConfig)
	if err != nil {
		_ = s.h3tr.Close()
		_ = pc.Close()
		s.h3, s.h3pc, s.h3tr = nil, nil, nil
		s.d.Log.Warn("edge http3 not started", "addr", ta.String(), "err", err)
		return nil
	}
	s.h3ln = ln
	s.altSvc = `h3=":` + strconv.Itoa(ta.Port) + `"; ma=86400`
	s.altSvcs = []string{s.altSvc}[:1:1]
	s.h3done = make(chan struct{})
	go func() {
		defer close(s.h3done)
		if err := s.h3.ServeListener(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, quic.ErrServerClosed) {
			s.d.Log.Warn("edge http3 stopped", "err", err)
		}
	}()
	return nil
}

// h3Conn is what the edge keeps of an HTTP/3 connection: its upstream
// slots, and the requests its handler is running and when the last one
// ended (watchH3). h3ConnKey finds it in a request's context.
type h3Conn struct {
	slots   h3Slots
	running atomic.Int64
	last    atomic.Int64 // unix nanoseconds
}

type h3ConnKey struct{}

// h3ConnOf is r's connection's h3Conn, nil when r is not HTTP/3.
func h3ConnOf(r *http.Request) *h3Conn {
	hc, _ := r.Context().Value(h3ConnKey{}).(*h3Conn)
	return hc
}

// ended notes that a request the handler ran has ended.
func (hc *h3Conn) ended() {
	hc.last.Store(time.Now().UnixNano())
	hc.running.Add(-1)
}

// watchH3 closes c (H3_NO_ERROR) once the handler has run none of its
// requests for IdleTimeout and ReadTimeout, and counts it open, holding
// its slot of the edge's cap, until it ends.
//
// Why: quic-go's http3 reads a request stream's HEADERS frame with no
// deadline, and stops its own idle timer while any stream is open; QUIC's
// idle timeout never fires while the client sends PINGs. A client that
// opened streams and sent nothing on them (or part of a HEADERS frame)
// held a goroutine and the stream's state for each, and the connection,
// for good (measured: 10 connections of 90 such streams were all still
// open after 90 s, 950 goroutines). The handler sees only streams whose
// head has arrived, so what counts as use here is a request it runs: a
// connection with none running and none ended for that long is closed,
// whatever streams are open. A connection with no stream open is closed
// by http3's idle timer at IdleTimeout, before this one; one still open
// ReadTimeout later (the time an HTTP/1.1 head has to come) holds
// streams whose head never came, and is counted (Counters.H3Stuck). A
// client that keeps one real request going keeps its connection, with
// at most MaxH2Streams streams on it, as over HTTP/2.
//
// The check takes no lock and costs the request path a context lookup,
// a clock read and two atomic adds; this goroutine is the one the open
// count already took per connection, and wakes about once per idle
// period.
func (s *Server) watchH3(c *quic.Conn, hc *h3Conn, slot *clientSlot) {
	defer slot.release()
	defer s.h3open.Add(-1)
	limit := s.d.IdleTimeout + s.d.ReadTimeout
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		select {
		case <-c.Context().Done():
			return
		case <-t.C:
		}
		if hc.running.Load() > 0 {
			t.Reset(limit)
			continue
		}
		if quiet := time.Since(time.Unix(0, hc.last.Load())); quiet < limit {
			t.Reset(limit - quiet)
			continue
		}
		s.h3stuck.Add(1)
		s.d.Log.Debug("http3 connection closed: streams open, no request for its idle time", "remote", c.RemoteAddr().String())
		_ = c.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeNoError), "idle")
		return
	}
}

// h3Slots are an HTTP/3 connection's upstream slots.
type h3Slots chan struct{}

// h3Slot takes one of r's connection's upstream slots, waiting while
// r's client is still there. It gives the slots to give it back to (nil
// when r is not HTTP/3), and false when the client left first: w has
// been answered 499 then.
func h3Slot(w http.ResponseWriter, r *http.Request) (h3Slots, bool) {
	if r.ProtoMajor != 3 {
		return nil, true
	}
	hc := h3ConnOf(r)
	if hc == nil {
		return nil, true
	}
	slots := hc.slots
	select {
	case slots <- struct{}{}:
		return slots, true
	case <-r.Context().Done():
		w.WriteHeader(499)
		return nil, false
	}
}

// release gives a slot back (nothing for nil).
func (sl h3Slots) release() {
	if sl != nil {
		<-sl
	}
}

// stopH3 stops taking HTTP/3 connections, sends GOAWAY on those open,
// waits until ctx ends for their requests to end (http3.Server.Shutdown
// then closes what is left), and closes the socket.
func (s *Server) stopH3(ctx context.Context) {
	if s.h3 == nil {
		return
	}
	// Handshakes from now on are refused; connections already
	// established are not touched (quic-go's Listener.Close).
	_ = s.h3ln.Close()
	_ = s.h3.Shutdown(ctx)
	<-s.h3done
	_ = s.h3tr.Close()
	_ = s.h3pc.Close()
}

// H3Addr is the HTTP/3 (UDP) address, nil without HTTP/3.
func (s *Server) H3Addr() net.Addr {
	if s.h3pc == nil {
		return nil
	}
	return s.h3pc.LocalAddr()
}
