package proxy

import "net/http"

// What the edge counts of HTTP/2 and HTTP/3 abuse.
//
// Protocol errors: every one the HTTP/2 server sees (a frame the
// protocol forbids, a stream opened past the concurrent-stream limit, a
// flood of control frames), through its CountError hook (Counters.H2Errors).
// A connection its client closes before sending a byte is in neither
// count: browsers close their spare connections so (h2srv's
// closedUnused).
//
// A connection closed with an error: the HTTP/2 server ends a
// connection whose header block it will not read (a CONTINUATION
// flood: any CONTINUATION frame after the header list passed its limit,
// or a fragment more than twice what is left of it; an HPACK block that
// does not decode), or that breaks the protocol, with GOAWAY and an
// error code, and says so once per connection through its ConnError
// hook (Counters.H2ConnErrors, /metrics
// peerdns_edge_http2_connection_errors_total); so is a TLS 1.2
// connection refused for its cipher suite. A connection error that
// CountError also sees (a control-frame flood's GOAWAY
// ENHANCE_YOUR_CALM, a frame on stream 0 that must not be) is in both counts: one counts
// errors by kind, the other connections closed.
//
// A header list over the limit. The HTTP/2 server answers 431 to a
// header list past its limit by itself, which the edge never sees, and
// quic-go's http3 does the same for a HEADERS frame past its own: such a
// request would be in no count. So both limits are set to twice
// MaxHeaderBytes, and route answers a list over MaxHeaderBytes
// (headerList) with a 431 of its own, counted as any answer (route
// "none" in edge_requests_total). Only a list past twice the limit gets
// its library's own, uncounted 431 (or, over HTTP/2 sent in large
// fragments, the connection error above). The cost: a stream may hold a
// decoded header list of up to 32 KiB until route refuses it, at most
// MaxH2Streams of them per connection for the moment each takes.
//
// A rapid reset. A stream whose client resets it once the edge has taken
// it is answered 499 (client closed request, as nginx logs it) and
// counted so in edge_requests_total; over HTTP/3 too. Streams reset
// while still in the HTTP/2 server's handler queue never reach the edge
// (a rapid reset's share of them is the part the server drops unseen),
// nor do HTTP/3 streams reset before quic-go has read their request. The
// queue holds only streams open on the wire, so it is never longer than
// the stream limit, and a client that resets its streams gets no more
// handlers running at once than that limit (h2srv's package doc).

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
