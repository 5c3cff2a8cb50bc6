package proxy

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// A request head fasthttp reads but a proxy should not pass on. fasthttp
// is a lenient server (it is written for the handler behind it, not for
// a server behind that): it takes any "HTTP/d.d" version, a field name
// with a space inside it (the other bytes no token has it refuses; the
// check below holds names to the token rule whole), and a Host with
// user information, which it turns into an Authorization header of its
// own making. Passed on as they came, each is read by the upstream in a
// way of its own, or says what the client did not (a Basic credential a
// proxy in front of the edge, stripping Authorization, never saw). The
// edge refuses them, as RFC 9110 §2.5, §5.1 and §7.2 and RFC 9112 §2.3
// let a server (nginx refuses the version too, Go's net/http and HAProxy
// the field name):
//
//   - a major version other than 1: 505 HTTP Version Not Supported;
//     HTTP/1.2 and up are read as HTTP/1.1 and go upstream as that;
//   - a field name that is not a token (RFC 9110 §5.6.2): 400;
//   - a Host, or the authority of a request target in absolute form,
//     with user information ("user@host"): 400;
//   - a Host (or such an authority) that is not a host name (letters,
//     digits, '-', '.', '_') or an IP literal in brackets, with or without
//     a port of digits (validHost): 400. fasthttp refuses some bytes in a
//     Host (a space, '/') but takes others a name cannot hold ("," ";"
//     "<" '"'), and routing goes by the name's last labels
//     ("evil.example,x.site.p2p" is a subdomain of site.p2p to it): the
//     edge would hand the upstream, in Host and in the X-Forwarded-Host
//     it vouches for, a value that an upstream reading the first of a
//     list takes for evil.example (its links and redirects built on it).
//     The same holds for an HTTP/2 or HTTP/3 :authority (unfitTarget),
//     where net/http's server takes '/', '?', '#' and spaces too;
//   - a request target of "*" with a method other than OPTIONS (RFC
//     9112 §3.2.4): 400, as over HTTP/2 and HTTP/3 (unfitTarget). Passed
//     on, "GET *" was the upstream's to make sense of; a target that is
//     neither a path, "*" nor an http or https URI ("ftp://host/",
//     "x"): 400;
//   - a Transfer-Encoding other than chunked alone: 501 Not Implemented
//     (RFC 9112 §6.1, as nginx answers). fasthttp refuses the codings
//     it does not know, and a second Transfer-Encoding field, itself,
//     but takes "identity" for none, and then the body's bytes for a
//     next request, where a proxy in front of the edge that went by
//     another reading sees a body (request smuggling);
//   - a Content-Length, Transfer-Encoding or Host field folded over
//     lines (obs-fold: "Transfer-Encoding:" and " chunked" on the next
//     line): 400, as nginx answers every folded field. fasthttp joins
//     the lines and goes by the joined value; a proxy in front of the
//     edge that reads the first line alone frames the body, or picks
//     the site, otherwise (request smuggling). Other fields may still
//     be folded, and go upstream joined by one space;
//   - CONNECT and TRACE: 501 Not Implemented (unservedMethod);
//   - Connection fields that name more than maxNominees fields in all:
//     400. Each name is a field the edge deletes before it passes the
//     request on (dropHopRequest), and a delete walks every field of the
//     head: a 16 KiB head of a thousand short fields with a Connection
//     naming each would cost the edge 1.3-2.5 ms, fifty times a request.
//     Browsers and libraries name one or two (keep-alive, Upgrade, TE).
//
// The connection is closed after each of these answers.
//
// serve walks a head's field names as they came (RawHeaders) once per
// request (headNames): the walk tells this check whether a name is not a
// token, bothFramings whether the head declares its length both ways,
// dropHopRequest whether it has hop-by-hop names to delete, and
// setForwarded whether it has forwarding fields of its own.

// headNames is what one walk over a request head's field names found.
type headNames struct {
	cl, te   bool // a Content-Length, a Transfer-Encoding field
	teOther  bool // a Transfer-Encoding other than chunked alone
	folded   bool // a Content-Length, Transfer-Encoding or Host folded over lines (obs-fold)
	hop      bool // a hop-by-hop field (hopHeaders)
	notToken bool // a name that is not a token
	fwd      bool // a name starting X-Forwarded- (setForwarded)
	expect   bool // an Expect field (not passed on: expect.go)
	// nominees: the fields the Connection fields name for deletion,
	// counted (countNominees).
	nominees int
}

// maxNominees is the most names a request's Connection fields may give
// (unfitHead).
const maxNominees = 32

func namesOf(h *fasthttp.RequestHeader) (n headNames) {
	for name, value := range rawFields(h.RawHeaders()) {
		k := b2s(name)
		hop := hopIndex(k)
		switch {
		case hop >= 0:
			n.hop = true
			if hop == connectionIndex {
				n.nominees += countNominees(value)
			}
			if len(k) == len("Transfer-Encoding") && strings.EqualFold(k, "Transfer-Encoding") {
				n.teOther = n.teOther || !strings.EqualFold(b2s(value), "chunked")
				n.te = true
				n.folded = n.folded || foldedField(name, value)
			}
		case len(k) == len("Content-Length") && strings.EqualFold(k, "Content-Length"):
			n.cl = true
			n.folded = n.folded || foldedField(name, value)
		case len(k) == len("Host") && strings.EqualFold(k, "Host"):
			n.folded = n.folded || foldedField(name, value)
		case len(k) > len(xForwarded) && forwardedPrefix(k):
			n.fwd = true
		case len(k) == len("Expect") && strings.EqualFold(k, "Expect"):
			n.expect = true
		}
		for i := 0; i < len(name) && !n.notToken; i++ {
			n.notToken = !tokenByte[name[i]]
		}
	}
	return n
}

// foldedField reports whether a field rawFields yielded (its name and
// value, slices of one head) was folded over lines: a line break lies
// between its name's first byte and its value's last. Not the value
// alone: a fold right after the colon is trimmed off it.
func foldedField(name, value []byte) bool {
	n := int(uintptr(unsafe.Pointer(unsafe.SliceData(value)))-uintptr(unsafe.Pointer(unsafe.SliceData(name)))) + len(value)
	return n > 0 && n <= cap(name) && bytes.IndexByte(name[:n], '\n') >= 0
}

// bothFramings reports whether a request read from the wire carries both
// a Transfer-Encoding and a Content-Length field. RFC 9112 §6.3 lets
// chunked win (fasthttp then reads the chunks and forgets the
// Content-Length; it ignores a Transfer-Encoding of identity and goes by
// the Content-Length), but a proxy in front of the edge that went the
// other way would split the stream elsewhere: the rest of a body taken
// for a next request (request smuggling). The RFC says such a message
// ought to be handled as an error, and nginx refuses it; so does the
// edge.
func (n headNames) bothFramings() bool { return n.cl && n.te }

// tokenByte marks the bytes a token may hold (RFC 9110 §5.6.2: tchar).
var tokenByte = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range []byte("!#$%&'*+-.^_`|~") {
		t[c] = true
	}
	return t
}()

// unfitHead returns the status and reason to refuse a request head with
// (n: its names, namesOf), or 0 when it may go on; a head of HTTP/1.2 or
// above it sets to HTTP/1.1, as it goes upstream.
func unfitHead(h *fasthttp.RequestHeader, n headNames) (int, string) {
	if p := h.Protocol(); !bytes.Equal(p, strHTTP11) {
		// fasthttp took it as "HTTP/" digit "." digit.
		if len(p) != len(strHTTP11) || p[5] != '1' {
			return fasthttp.StatusHTTPVersionNotSupported, "Only HTTP/1.x is spoken on this connection."
		}
		if p[7] > '1' {
			h.SetProtocolBytes(strHTTP11)
		}
	}
	if st, why := unservedMethod(b2s(h.Method())); st != 0 {
		return st, why
	}
	if host := h.Host(); bytes.IndexByte(host, '@') >= 0 {
		return fasthttp.StatusBadRequest, "The Host header carries user information."
	} else if !validHost(b2s(host)) {
		return fasthttp.StatusBadRequest, "The Host header is not a host name, with or without a port."
	}
	if u := h.RequestURI(); len(u) > 0 && u[0] != '/' { // absolute-form, or *
		if len(u) == 1 && u[0] == '*' {
			if !h.IsOptions() {
				return fasthttp.StatusBadRequest, "A request target of * is for OPTIONS only."
			}
		} else if i := bytes.Index(u, strSchemeEnd); i < 0 || !httpScheme(u[:i]) {
			return fasthttp.StatusBadRequest, "The request target is neither a path nor an http or https URI."
		} else {
			auth := u[i+len(strSchemeEnd):]
			if j := bytes.IndexAny(auth, "/?#"); j >= 0 {
				auth = auth[:j]
			}
			if bytes.IndexByte(auth, '@') >= 0 {
				return fasthttp.StatusBadRequest, "The request's URI carries user information."
			}
			if !validHost(b2s(auth)) {
				return fasthttp.StatusBadRequest, "The request's URI names no host name, with or without a port."
			}
		}
	}
	if n.notToken {
		return fasthttp.StatusBadRequest, "A header field's name is not a token."
	}
	if n.folded {
		return fasthttp.StatusBadRequest, "A Content-Length, Transfer-Encoding or Host field is folded over lines."
	}
	if n.teOther {
		return fasthttp.StatusNotImplemented, "The only transfer coding read here is chunked, alone."
	}
	if n.nominees > maxNominees {
		return fasthttp.StatusBadRequest, tooManyNominees
	}
	return 0, ""
}

var tooManyNominees = fmt.Sprintf("The Connection header names more than %d fields.", maxNominees)

// countNominees counts the fields a Connection value names that
// dropHopRequest would delete (nextNominee).
func countNominees(v []byte) int {
	n := 0
	for len(v) > 0 {
		var k []byte
		if k, v = nextNominee(v); len(k) > 0 {
			n++
		}
	}
	return n
}

// unservedMethod returns the status and reason to refuse CONNECT and
// TRACE with, on every protocol, or 0. CONNECT asks a forward proxy for a
// tunnel to the authority it names; the edge is a reverse proxy in front
// of a claim's upstream, and passed on such a request reached the
// upstream as a GET-like request for the path "/host:port" (HTTP/1.1) or
// opened a byte tunnel to it (HTTP/2 through ReverseProxy). TRACE has the
// upstream echo the request back, with the cookies and credentials the
// client added to it (cross-site tracing). nginx refuses both (405). The
// edge answers 501: neither is served for any resource here (RFC 9110
// §15.6.2), so no Allow field is owed as with 405. Methods compare with
// case, as RFC 9110 §9.1 has them.
func unservedMethod(m string) (int, string) {
	switch m {
	case http.MethodConnect:
		return http.StatusNotImplemented, "CONNECT is not served here: the edge passes requests on to sites, it opens no tunnels."
	case http.MethodTrace:
		return http.StatusNotImplemented, "TRACE is not passed on: its echo would hand a page the cookies and credentials sent with it."
	}
	return 0, ""
}

// httpScheme reports whether an absolute-form target's scheme is http
// or https, in any case (RFC 9112 §3.2.2: a server's target; fasthttp
// takes any, and an "ftp://host/" request was routed by its host).
func httpScheme(s []byte) bool {
	return bytes.EqualFold(s, strHTTP) || bytes.EqualFold(s, strHTTPS)
}

// validHost reports whether a Host (or :authority) is a host name or an
// IP literal in brackets, then an optional ':' and port digits (RFC 3986
// §3.2.2 and §3.2.3, the name held to what DNS names hold; empty is the
// caller's to refuse). A walk over the Host's bytes with a table lookup
// each, a few nanoseconds per request: the price of never passing on a
// Host that two readers take for two sites.
func validHost(a string) bool {
	i := 0
	if len(a) > 0 && a[0] == '[' {
		for i = 1; i < len(a) && a[i] != ']'; i++ {
			if c := a[i]; !hexByte[c] && c != ':' && c != '.' {
				return false
			}
		}
		if i == len(a) {
			return false
		}
		i++
	} else {
		for ; i < len(a) && a[i] != ':'; i++ {
			if !hostByte[a[i]] {
				return false
			}
		}
	}
	if i == len(a) {
		return true
	}
	if a[i] != ':' {
		return false
	}
	for i++; i < len(a); i++ {
		if a[i] < '0' || a[i] > '9' {
			return false
		}
	}
	return true
}

// hostByte marks the bytes a host name may hold here: letters, digits,
// '-', '.', '_'; hexByte the hex digits.
var hostByte, hexByte = func() (h, x [256]bool) {
	for c := '0'; c <= '9'; c++ {
		h[c], x[c] = true, true
	}
	for c := 'a'; c <= 'z'; c++ {
		h[c], h[c-'a'+'A'] = true, true
	}
	for c := 'a'; c <= 'f'; c++ {
		x[c], x[c-'a'+'A'] = true, true
	}
	h['-'], h['.'], h['_'] = true, true, true
	return h, x
}()

const xForwarded = "X-Forwarded-"

// forwardedPrefix reports whether k starts with xForwarded, in any case
// and with underscores for its dashes (setForwarded drops those).
func forwardedPrefix(k string) bool {
	for i := range len(xForwarded) {
		if !foldedByte(k[i], xForwarded[i]) {
			return false
		}
	}
	return true
}

// foldedByte reports whether c stands for w, a letter or a dash of a
// forwarding field's name: the letter in either case, a dash or an
// underscore for the dash.
func foldedByte(c, w byte) bool {
	if w == '-' {
		return c == '-' || c == '_'
	}
	return c|0x20 == w|0x20
}

var (
	strHTTP11    = []byte("HTTP/1.1")
	strSchemeEnd = []byte("://")
)

// An HTTP/2 or HTTP/3 request goes upstream in HTTP/1.1, its :method and
// :path written into a request line. net/http's server and quic-go's
// http3 take a :path with spaces in it ("/a?x= HTTP/1.1" became the line
// "GET /a?x= HTTP/1.1 HTTP/1.1"), in absolute form ("http://other/x":
// an upstream that serves several names would go by its authority, not
// the Host the edge routed by), or "*" with any method, and a :method
// that is not a token. RFC 9113 §8.3.1 and RFC 9114 §4.3.1 make all of
// these malformed; nginx refuses them. So does the edge, with 400
// (unfitTarget): a :method must be a token, a :path origin-form (a "/"
// and no byte at or below a space, DEL or "#"), or "*" for OPTIONS
// (forwarded as over HTTP/1.1). CONNECT and TRACE are
// refused as over HTTP/1.1 (unservedMethod). Field values are checked in the
// walk that sizes the header list (headerList).
//
// A Host field beside :authority must name the same authority (RFC 9113
// §8.3.1: a server should treat one that does not as malformed; RFC
// 9114 §4.3.1 makes it so, and quic-go's http3 refuses it before the
// edge sees the request). The HTTP/2 server routes by :authority
// and keeps the Host field among the others; the edge would route by one
// name while the request carried another, so it answers 400, as it does
// to an HTTP/1.1 request with two Host fields. Names compare without
// case (RFC 9110 §4.2.3).
func unfitTarget(r *http.Request) (int, string) {
	m := r.Method
	if m == "" {
		return http.StatusBadRequest, "The request has no method."
	}
	for i := 0; i < len(m); i++ {
		if !tokenByte[m[i]] {
			return http.StatusBadRequest, "The request's method is not a token."
		}
	}
	if hs := r.Header["Host"]; len(hs) > 1 || len(hs) == 1 && !strings.EqualFold(hs[0], r.Host) {
		return http.StatusBadRequest, "The Host header names another authority than :authority."
	}
	if !validHost(r.Host) {
		return http.StatusBadRequest, "The :authority is not a host name, with or without a port."
	}
	if st, why := unservedMethod(m); st != 0 {
		return st, why
	}
	p := r.RequestURI
	if p == "*" {
		if m != http.MethodOptions {
			return http.StatusBadRequest, "A :path of * is for OPTIONS only."
		}
		return 0, ""
	}
	if p == "" || p[0] != '/' {
		return http.StatusBadRequest, "The request's :path is not a path."
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c == 0x7f || c == '#' {
			return http.StatusBadRequest, "The request's :path holds a byte a request line cannot carry."
		}
	}
	return 0, ""
}
