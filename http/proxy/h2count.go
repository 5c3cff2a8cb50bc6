package proxy

import (
	"bytes"
	"net/http"
)

// What the edge counts of HTTP/2 and HTTP/3 abuse beyond net/http's
// CountError hook (which sees frames the protocol forbids, and a rapid
// reset past the handler queue, but neither of the two below).
//
// A connection closed with an error. net/http's server ends a
// connection whose header block it will not read (a CONTINUATION
// flood: any CONTINUATION frame after the header list passed its limit,
// or a fragment more than twice what is left of it; an HPACK block that
// does not decode) with GOAWAY and an error code, and says so on its
// ErrorLog only: "http2: server connection error from ADDR: ...", one
// line per connection. h2ErrorLog counts those lines
// (Counters.H2ConnErrors, /metrics peerdns_edge_http2_connection_errors_total)
// and logs them at debug level; it is the only place the server reports
// them. A connection error that CountError also sees (a rapid reset's
// GOAWAY ENHANCE_YOUR_CALM, a frame on stream 0 that must not be) is in
// both counts: one counts errors by kind, the other connections closed.
// TestEdgeHTTP2Attacks fails if a toolchain changes the line.
//
// A header list over the limit. net/http answers 431 to a header list
// past its MaxHeaderBytes by a handler of its own, which the edge never
// sees, and quic-go's http3 does the same for a HEADERS frame past its
// own: such a request would be in no count. So both limits are set to
// twice MaxHeaderBytes, and route answers a list over MaxHeaderBytes
// (headerList) with a 431 of its own, counted as any answer (route
// "none" in edge_requests_total). Only a list past twice the limit gets
// its library's own, uncounted 431 (or, over HTTP/2 sent in large
// fragments, the connection error above). The cost: a stream may hold a
// decoded header list of up to 32 KiB until route refuses it, at most
// MaxH2Streams of them per connection for the moment each takes.

// A rapid reset. A stream whose client resets it once the edge has taken
// it is answered 499 (client closed request, as nginx logs it) and
// counted so in edge_requests_total; over HTTP/3 too. Streams reset
// while still in net/http's handler queue never reach the edge (a
// rapid reset's share of them is the part net/http drops unseen), nor
// do HTTP/3 streams reset before quic-go has read their request; and a
// queue past four times the stream limit ends the connection with
// GOAWAY ENHANCE_YOUR_CALM, in both counts above.

// h2ErrorLog is net/http's HTTP/2 server's ErrorLog writer.
type h2ErrorLog struct{ s *Server }

var h2ConnError = []byte("http2: server connection error from ")

func (l h2ErrorLog) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, h2ConnError) {
		l.s.h2connErrors.Add(1)
	}
	l.s.d.Log.Debug("http2 server", "msg", string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// headerList is the size of r's header list as RFC 9113 §6.5.2 and
// RFC 9114 §4.2.2 count it (each field's name and value and 32), the
// pseudo-header fields included, over the fields as net/http and
// quic-go's http3 hand them on (several Cookie fields joined in one);
// and, from the same walk, whether a field value starts or ends with a
// space or tab. RFC 9113 §8.2.1 and RFC 9114 §4.2 make such a request
// malformed (the libraries refuse control bytes in a value, not its
// padding): in HTTP/1.1 the padding is no part of the value, so an
// upstream would read a value other than the one the edge passed on
// and logged.
func headerList(r *http.Request) (size int, padded bool) {
	const per = 32
	size = len(":method") + len(r.Method) + per +
		len(":scheme") + len("https") + per +
		len(":authority") + len(r.Host) + per +
		len(":path") + len(r.RequestURI) + per
	for k, vs := range r.Header {
		for _, v := range vs {
			size += len(k) + len(v) + per
			if v != "" && (isPad(v[0]) || isPad(v[len(v)-1])) {
				padded = true
			}
		}
	}
	return size, padded
}

func isPad(c byte) bool { return c == ' ' || c == '\t' }
