package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
	"peerdns/internal/view"
)

// hopHeaders are not passed on (RFC 9110 7.6.1), nor are the fields a
// message's Connection headers name (nextNominee). Upgrade among them: a
// WebSocket upgrade goes its own way (websocket, below), the two headers
// that ask for it written anew; any other (h2c) is the edge's to take or
// not, and the edge does not, so the upstream must not answer it with
// 101 on a connection the edge keeps speaking HTTP/1.1 on (nginx drops
// it too).
// connectionIndex is Connection's place in hopHeaders.
const connectionIndex = 0

var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// isHopName reports whether a header name is one of hopHeaders, in any
// case.
func isHopName(k string) bool { return hopIndex(k) >= 0 }

// hopIndex is k's place in hopHeaders, in any case, or -1.
func hopIndex(k string) int {
	switch len(k) {
	case 2, 7, 10, 16, 17, 18, 19: // the lengths of hopHeaders' names
		for i, h := range hopHeaders {
			if len(h) == len(k) && strings.EqualFold(k, h) {
				return i
			}
		}
	}
	return -1
}

// dropHopRequest drops the hop-by-hop headers of a client's request. Its
// names were normalized when the server read it, so Del finds each name
// whatever case it came in. Which names to delete is read from the head
// as it came (RawHeaders), so a request deletes only those it carries
// (most carry none, a browser's a Connection): each Del copies its key
// and looks through every header, and eight of them were 1.5% of the
// edge's CPU. serve has walked the names once already (headNames); hop
// is what it found, and a head without hop-by-hop names is not walked
// again. A request not read from the wire (no raw head) has every name
// deleted. Each hop-by-hop name is deleted once, however often it
// came (a Del takes every field of that name, and looks through every
// field of the head: a head of a thousand Keep-Alive fields would make
// as many walks), and the names the Connection fields give are at most
// maxNominees (unfitHead refused more). Not the walk dropHopResponse
// makes: RequestHeader.All parses the Cookie headers as it goes, and
// they would then go upstream written anew instead of as the client
// sent them.
func dropHopRequest(h *fasthttp.RequestHeader, hop bool) {
	raw := h.RawHeaders()
	if len(raw) == 0 {
		for _, k := range hopHeaders {
			h.Del(k)
		}
		return
	}
	if !hop {
		return
	}
	var gone uint16 // the hopHeaders deleted, by place
	for name, value := range rawFields(raw) {
		if i := hopIndex(b2s(name)); i >= 0 {
			if gone&(1<<i) == 0 {
				gone |= 1 << i
				h.DelBytes(name)
			}
			for v := value; i == connectionIndex && len(v) > 0; {
				var k []byte
				if k, v = nextNominee(v); len(k) > 0 {
					h.DelBytes(k)
				}
			}
		}
	}
}

// nextNominee splits the next field name off a Connection header's
// value (RFC 9110 7.6.1: the fields it names are for this hop alone,
// and a proxy removes them before it forwards the message): tok is
// empty for a name to leave (empty, hop-by-hop and so dropped anyway,
// or one keptNominee keeps), rest what is left of the value.
func nextNominee(value []byte) (tok, rest []byte) {
	tok, rest, _ = bytes.Cut(value, comma)
	tok = trimSpace(tok) // a request's value as it came may hold a folded line's break (rawFields)
	if isHopName(b2s(tok)) || keptNominee(b2s(tok)) {
		tok = nil
	}
	return tok, rest
}

// keptNominee reports whether a name a Connection header gives is kept
// whatever it says: those that route, frame and type the message (Host,
// Content-Length, Content-Type; Transfer-Encoding is hop-by-hop itself),
// which a client or an upstream could otherwise strip from under the
// edge's own routing and framing, or from the body it describes; the
// forwarding fields a proxy in front of the edge adds (X-Forwarded-For,
// whose chain the edge extends, Forwarded, X-Real-IP), which a client
// naming them would otherwise strip from what the upstream is told of
// it (nginx and HAProxy pass every field a Connection header names);
// and the option close (not a field). Only a request or an answer that
// names fields in Connection asks.
func keptNominee(k string) bool {
	return strings.EqualFold(k, "Host") || strings.EqualFold(k, "Content-Length") || strings.EqualFold(k, "Content-Type") ||
		strings.EqualFold(k, "X-Forwarded-For") || strings.EqualFold(k, "Forwarded") || strings.EqualFold(k, "X-Real-IP") ||
		strings.EqualFold(k, "Close")
}

// rawFields yields the fields of a head as it came (RawHeaders: the
// lines after the request line): each name as written, the spaces
// before its colon cut, and its value, the spaces around it cut. A
// folded line (obs-fold: one that starts with a space or a tab) goes on
// the value of the field before it, as fasthttp reads it (there each
// fold is one space; here the value is the head's bytes, the line break
// and all); it is never a field of its own.
func rawFields(raw []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		for i := 0; i < len(raw); {
			first, next := lineAt(raw, i)
			end := first
			for next < len(raw) && (raw[next] == ' ' || raw[next] == '\t') {
				end, next = lineAt(raw, next)
			}
			line := raw[i:end]
			colon := bytes.IndexByte(raw[i:first], ':') // in the field's own line
			i = next
			if colon <= 0 || line[0] == ' ' || line[0] == '\t' { // not a field, or the head's first line folded
				continue
			}
			name := line[:colon]
			for len(name) > 0 && (name[len(name)-1] == ' ' || name[len(name)-1] == '\t') {
				name = name[:len(name)-1]
			}
			if !yield(name, trimSpace(line[colon+1:])) {
				return
			}
		}
	}
}

// lineAt is where the line of raw that starts at i ends (its '\n', or
// raw's end) and where the next one starts.
func lineAt(raw []byte, i int) (end, next int) {
	if j := bytes.IndexByte(raw[i:], '\n'); j >= 0 {
		return i + j, i + j + 1
	}
	return len(raw), len(raw)
}

// trimSpace cuts the spaces, tabs and line breaks around a field's value
// or a name in it (a line's CR, a folded line's break). Not bytes.Trim,
// which builds its set of bytes anew at each call, for every field of
// every request's head.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}

// dropHopResponse drops the hop-by-hop headers of an upstream's answer,
// those its Connection headers name (nextNominee), and its Alt-Svc
// (droppedName), by one walk over its headers, which in nearly every exchange finds none (or only a
// Connection: keep-alive, which names nothing more); it gathers the
// Connection headers' values as it goes. The first name found is
// deleted; when it was the only hop-by-hop field and named nothing more
// (the Connection: keep-alive), that is all. Otherwise one more walk
// gathers every other name to drop, each once as it came, and they are
// deleted after it (a header cannot be deleted while All walks them).
// Why not Del for each hop-by-hop name: the pool keeps an upstream's
// names as they came (it does not normalize them), so Del("Keep-Alive")
// left a "keep-alive" in place; and each Del copies its key and looks
// through every header, eight times an answer. Connection and Trailer
// are among the names the walk yields when set (fasthttp keeps them
// apart from the other headers), and deleting them clears them as Del
// did. The work is the head's fields plus the names given, and a Del
// (a look through every header) for each name to drop: readHead takes
// at most maxAnswerFields fields, so an upstream cannot make one answer
// cost the edge more than that squared.
func dropHopResponse(h *fasthttp.ResponseHeader) {
	var kept [64]byte
	nominated := kept[:0] // the names the Connection headers give, comma-separated
	var first [32]byte    // the first name to drop (at most 19 bytes)
	n, hops := 0, 0
	for k, v := range h.All() {
		if droppedName(k) {
			hops++
			if n == 0 {
				n = copy(first[:], k)
			}
			if isConnection(k) {
				nominated = appendNominees(nominated, v)
			}
		}
	}
	if n == 0 {
		return
	}
	h.DelBytes(first[:n])
	if hops == 1 && len(nominated) == 0 {
		return // the one field there was (an upstream's Connection: keep-alive): no walk to find none
	}
	named := nomineesOf(nominated)
	var seen map[string]struct{}
	var drop []string
	for k := range h.All() {
		if !droppedName(k) && !named.has(k) {
			continue
		}
		if _, ok := seen[b2s(k)]; ok {
			continue
		}
		if seen == nil {
			seen = make(map[string]struct{})
		}
		name := string(k)
		seen[name] = struct{}{}
		drop = append(drop, name)
	}
	for _, name := range drop {
		h.DelBytes(s2b(name))
	}
}

// droppedName reports whether an answer's field k is dropped whatever
// its Connection headers say: a hop-by-hop one, or Alt-Svc, which names
// the upstream's own ports, behind the tunnel (h3.go); the edge sets
// its own on TLS (answer), and none over plain HTTP, where it has
// nothing to offer. Dropped in this walk, which every answer takes
// anyway: one length compare a field more, where a Del would look
// through every field again.
func droppedName(k []byte) bool {
	return isHopName(b2s(k)) || len(k) == len("Alt-Svc") && strings.EqualFold(b2s(k), "Alt-Svc")
}

// nominees are the field names Connection headers give (appendNominees'
// list), looked up by name. A list of a few names is walked; a longer
// one is made a set once, so that looking up every field of a head is
// not its fields times its names (an answer's head of up to 32 KiB
// could name thousands).
type nominees struct {
	list []byte              // comma-separated
	set  map[string]struct{} // lower-case, when the list is long
}

// walkedNominees is the longest list walked rather than made a set.
const walkedNominees = 256

func nomineesOf(list []byte) nominees {
	if len(list) <= walkedNominees {
		return nominees{list: list}
	}
	set := make(map[string]struct{})
	for len(list) > 0 {
		var item []byte
		item, list, _ = bytes.Cut(list, comma)
		set[strings.ToLower(string(item))] = struct{}{}
	}
	return nominees{set: set}
}

// has reports whether the list names k, in any case.
func (n nominees) has(k []byte) bool {
	if n.set == nil {
		return listed(n.list, k, true)
	}
	_, ok := n.set[strings.ToLower(b2s(k))]
	return ok
}

// listed reports whether the comma-separated list holds k: as written,
// or in any case when fold.
func listed(list, k []byte, fold bool) bool {
	for len(list) > 0 {
		var item []byte
		item, list, _ = bytes.Cut(list, comma)
		if fold && bytes.EqualFold(item, k) || !fold && bytes.Equal(item, k) {
			return true
		}
	}
	return false
}

// appendNominees appends to list the field names a Connection header's
// value gives (but those nextNominee leaves), each followed by a comma.
// A Connection: keep-alive, nearly every upstream's, appends nothing.
func appendNominees(list, value []byte) []byte {
	for len(value) > 0 {
		var k []byte
		if k, value = nextNominee(value); len(k) > 0 {
			list = append(append(list, k...), ',')
		}
	}
	return list
}

var comma = []byte{','}

// isConnection reports whether a header name is Connection, in any case.
func isConnection(k []byte) bool {
	return len(k) == len("Connection") && strings.EqualFold(b2s(k), "Connection")
}

// upstream is one upstream (hash, TLS or not): its keep-alive client and
// the uploads streaming to it (body.go).
type upstream struct {
	hc      *fasthttp.HostClient
	uploads atomic.Int64
}

// takeUpload counts one more upload streaming to u, over any protocol;
// false (nothing counted) when max stream already (body.go). A true is
// given back with doneUpload.
func (u *upstream) takeUpload(max int64) bool {
	if u.uploads.Add(1) > max {
		u.uploads.Add(-1)
		return false
	}
	return true
}

func (u *upstream) doneUpload() { u.uploads.Add(-1) }

// upstreamConns is the most connections the edge keeps to one upstream.
const upstreamConns = 1024

// client is the upstream of d.
func (s *Server) client(d *view.Domain) *upstream {
	key := d.Hash
	if d.SSL {
		key += "+tls"
	}
	if u, ok := s.clients.Load(key); ok {
		return u.(*upstream)
	}
	hash := d.Hash
	idle := newIdleWatch()
	c := &fasthttp.HostClient{
		Addr: d.Name, // only names the client; Dial ignores it
		Dial: func(string) (net.Conn, error) {
			mc, err := s.dialMoving(hash)
			if err != nil {
				return nil, err
			}
			mc.pool = idle
			mc.rd.every.Store(int64(s.d.UpstreamTimeout))
			mc.wr.every.Store(int64(s.d.UpstreamTimeout))
			// A pooled connection is used by one exchange at a time:
			// its deadlines can wait for its reads and writes.
			mc.lazy = true
			return mc, nil
		},
		IsTLS:               d.SSL,
		TLSConfig:           upstreamTLS(d),
		MaxIdleConnDuration: IdleTimeout,
		// No ReadTimeout or WriteTimeout: the connection's own moving
		// deadlines (UpstreamTimeout between two operations, set at
		// Dial above) are the upstream's timeouts. fasthttp's would be a
		// deadline over the whole exchange, built from two clock reads
		// per request, that the moving ones make redundant.
		MaxConns:                      upstreamConns,
		MaxConnWaitTimeout:            5 * time.Second,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		NoDefaultUserAgentHeader:      true,
		SecureErrorLogMessage:         true, // see brief
		// Bodies longer than wholeBody, or of unknown length, are
		// streamed to the client as they come (a download of any size
		// costs the node its buffers, not its length in memory), and the
		// upstream connection is reused once the body has passed; shorter
		// ones are read whole (pool.go).
		Transport: poolTransport{local: &s.local},
	}
	actual, _ := s.clients.LoadOrStore(key, &upstream{hc: c})
	return actual.(*upstream)
}

// dial opens a stream (or, on this node, a TCP connection) to the server
// of hash.
func (s *Server) dial(hash string) (net.Conn, error) {
	ctx, cancel := ctxFor(dialTimeout)
	defer cancel()
	return s.d.Dialer.Dial(ctx, hash)
}

const dialTimeout = 10 * time.Second

// dialMoving is dial, the connection wrapped by movingUpstream.
func (s *Server) dialMoving(hash string) (*movingDeadlines, error) {
	c, err := s.dial(hash)
	if err != nil {
		return nil, err
	}
	return movingUpstream(c), nil
}

// movingUpstream wraps c, an upstream's HTTP/1.1 connection, so its
// deadlines move (both at zero: the caller sets them) and its ReadFrom
// copies with the request-body buffers.
func movingUpstream(c net.Conn) *movingDeadlines {
	return &movingDeadlines{Conn: c, bufs: &bodyBufs}
}

// upstreamTLS is how the edge speaks TLS to a claim with ssl: true. The
// certificate is not checked: the tunnel authenticated the server
// already (see the package doc).
func upstreamTLS(d *view.Domain) *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, ServerName: d.Name} //nolint:gosec // see above
}

// tlsUpstream speaks TLS over c (upstreamTLS), the handshake within
// dialTimeout.
func tlsUpstream(c net.Conn, d *view.Domain) (net.Conn, error) {
	return handshakeUpstream(context.Background(), c, upstreamTLS(d), d.Name)
}

// handshakeUpstream speaks TLS with conf over c, an upstream's
// connection, the handshake within dialTimeout (and ctx); c is closed
// when it fails.
func handshakeUpstream(ctx context.Context, c net.Conn, conf *tls.Config, name string) (*tls.Conn, error) {
	tc := tls.Client(c, conf)
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("TLS to %s: %w", name, err)
	}
	return tc, nil
}

// forward sends the request to the domain's tunnel server. The client's
// own request and response objects go upstream and come back (no copy of
// either: fasthttp's Do is synchronous, and the server reads
// whether the client asked to close before the handler runs). A body
// longer than what came with the head is streamed (body.go).
func (s *Server) forward(ctx *fasthttp.RequestCtx, d *view.Domain, names headNames) {
	if isUpgrade(ctx) {
		s.websocket(ctx, d, names)
		return
	}
	req, resp := &ctx.Request, &ctx.Response
	up := s.client(d)
	if req.IsBodyStream() {
		if n := req.Header.ContentLength(); n >= 0 && n <= SmallBody {
			// Whole first (a plain body, which fasthttp's client may
			// also retry on a fresh connection; it never retries a
			// stream it has begun to send).
			if _, ok := s.wholeBody(ctx, SmallBody); !ok {
				return
			}
		} else {
			if !up.takeUpload(s.d.MaxUploads) {
				s.busy(ctx, "too many uploads in flight to "+d.Name)
				return
			}
			defer up.doneUpload()
			prepare(ctx, req, names)
			s.upload(ctx, d, s.bodyStart(ctx))
			return
		}
	}
	prepare(ctx, req, names)
	// The scheme is the upstream's (the tunnel's), not the client's.
	if d.SSL {
		req.URI().SetSchemeBytes(strHTTPS)
	} else {
		req.URI().SetSchemeBytes(strHTTP)
	}
	if err := up.hc.Do(req, resp); err != nil {
		s.upstreamError(ctx, d, err)
		return
	}
	finish(ctx, resp)
}

// finish makes the upstream's answer the edge's own (ownHead) and
// sends it (sendBody).
func finish(ctx *fasthttp.RequestCtx, resp *fasthttp.Response) {
	ownHead(&resp.Header)
	sendBody(ctx, resp)
}

// ownHead makes an upstream's answer head the edge's own, as nginx
// does: its hop-by-hop headers dropped (dropHopResponse), and fitAnswer.
func ownHead(h *fasthttp.ResponseHeader) {
	dropHopResponse(h)
	fitAnswer(h)
}

// sendBody picks how resp's body goes to the client: up to the close
// for an HTTP/1.0 client and a body of unknown length (untilClose),
// else as fasthttp writes it, its head flushed early when it is long
// (flushHeadEarly).
func sendBody(ctx *fasthttp.RequestCtx, resp *fasthttp.Response) {
	if resp.IsBodyStream() && resp.Header.ContentLength() < 0 && !ctx.Request.Header.IsHTTP11() {
		untilClose(ctx, resp)
		return
	}
	flushHeadEarly(ctx, resp)
}

// untilClose sends an answer of unknown length to an HTTP/1.0 client as
// that version frames one: its body up to the connection's close (RFC
// 9112 §6.1: no Transfer-Encoding in an answer to a request below
// HTTP/1.1, which fasthttp would write chunked: the client would take
// the chunks' sizes for the body's bytes). The head and body are
// written on the connection once the handler is done (counted and
// logged as any answer), and the connection is closed after them.
func untilClose(ctx *fasthttp.RequestCtx, resp *fasthttp.Response) {
	resp.Header.Del(fasthttp.HeaderTransferEncoding)
	resp.Header.SetConnectionClose()
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		defer c.Close()
		if _, err := c.Write(resp.Header.AppendBytes(nil)); err != nil {
			return
		}
		_, _ = io.Copy(c, resp.BodyStream())
	})
}

// fitAnswer keeps what fasthttp would otherwise pass on or make up from
// the upstream's head out of the client's answer:
//
//   - The version: the edge speaks HTTP/1.1 to its client whatever its
//     upstream speaks. An HTTP/1.0 upstream's status line, passed on,
//     made a 1.1 client close its connection after the answer, over a
//     body the edge sends chunked (which a 1.0 recipient may not take
//     as framing); the close that version implied is the upstream
//     connection's, not the client's.
//   - A Content-Type the upstream did not send: fasthttp writes text/plain
//     for none, which changes what a browser makes of the body (a page
//     or a script shown as text, refused under nosniff). None stays
//     none.
//   - Content-Length on a 204, which RFC 9110 §8.6 forbids: the answer
//     has no body whatever the upstream declared, and a client that
//     believed the length would take the next answer's bytes for it.
func fitAnswer(h *fasthttp.ResponseHeader) {
	if !bytes.Equal(h.Protocol(), strHTTP11) {
		h.SetProtocol(strHTTP11)
		h.ResetConnectionClose()
	}
	h.SetNoDefaultContentType(true)
	if h.StatusCode() == fasthttp.StatusNoContent {
		h.Del(fasthttp.HeaderContentLength)
	}
}

var (
	strHTTP  = []byte("http")
	strHTTPS = []byte("https")

	strConnection  = []byte("Connection")
	strUpgradeName = []byte("Upgrade")
	strUpgrade     = []byte("Upgrade")
	strWebsocket   = []byte("websocket")
)

// prepare sets the forwarding headers and drops hop-by-hop ones and
// Expect (names: what the walk over the head found, headNames). A
// request body without a Content-Type goes without one: fasthttp would
// write application/octet-stream for it, and an upstream that reads a
// body by its type (a form, JSON taken when no type is named) would be
// told something the client did not say.
func prepare(ctx *fasthttp.RequestCtx, req *fasthttp.Request, names headNames) {
	req.Header.SetNoDefaultContentType(true)
	if names.expect { // the edge's to answer (expect.go)
		req.Header.DelBytes(strExpect)
	}
	dropHopRequest(&req.Header, names.hop)
	forwarded(ctx, req, names.fwd)
}

// forwarded sets the forwarding headers of a request read from the
// client's connection (setForwarded; prior: its head has X-Forwarded-
// fields).
func forwarded(ctx *fasthttp.RequestCtx, req *fasthttp.Request, prior bool) {
	client, _ := netip.AddrFromSlice(ctx.RemoteIP())
	setForwarded(req, client, ctx.IsTLS(), b2s(ctx.Host()), prior)
}

var (
	strXFF = []byte("X-Forwarded-For")
	strXFP = []byte("X-Forwarded-Proto")
	strXFH = []byte("X-Forwarded-Host")
)

// setForwarded makes req's forwarding headers the edge's own:
// X-Forwarded-For is the chain the client sent (every field of that
// name, in order, joined with ", ", as nginx's
// $proxy_add_x_forwarded_for joins them) and then client; every
// X-Forwarded-Proto and X-Forwarded-Host the client sent is replaced by
// one of the edge's: https when tls, and host. Set alone replaces only
// the first field of a name: a client that sent a name twice had its
// second reach the upstream beside the edge's, and an upstream that
// reads the last field would take the client's word for the scheme or
// the host it was asked for.
//
// prior: req may carry forwarding fields of its own; false only when a
// walk over its head found none (headNames), the common case, which
// then costs neither a lookup nor a delete. The names are written as
// they are (SetCanonical): the server normalized the client's, and the
// HTTP/2 pool's are net/http's canonical ones; normalizing each anew
// cost about half of what the forwarding headers cost.
func setForwarded(req *fasthttp.Request, client netip.Addr, tls bool, host string, prior bool) {
	b := bytebufferpool.Get()
	if prior {
		for _, v := range req.Header.PeekAll("X-Forwarded-For") {
			if len(v) > 0 {
				b.B = append(append(b.B, v...), ", "...)
			}
		}
		req.Header.DelBytes(strXFF)
		req.Header.DelBytes(strXFP)
		req.Header.DelBytes(strXFH)
		dropUnderscored(&req.Header)
	}
	if client.IsValid() {
		b.B = client.Unmap().AppendTo(b.B)
	}
	req.Header.SetCanonical(strXFF, b.B)
	bytebufferpool.Put(b)
	if tls {
		req.Header.SetCanonical(strXFP, strHTTPS)
	} else {
		req.Header.SetCanonical(strXFP, strHTTP)
	}
	req.Header.SetCanonical(strXFH, s2b(host)) // copied in
}

// dropUnderscored deletes the fields of a request read from the wire
// whose names are a forwarding field's spelt with underscores
// (underscoredForwarding). Only for a head with such a name
// (headNames.fwd).
func dropUnderscored(h *fasthttp.RequestHeader) {
	for name := range rawFields(h.RawHeaders()) {
		if underscoredForwarding(b2s(name)) {
			h.DelBytes(name)
		}
	}
}

// underscoredForwarding reports whether k is the name of a forwarding
// field the edge sets (X-Forwarded-For, -Proto, -Host) in any case,
// with underscores for some of its dashes: an app that reads fields as
// CGI variables (Rack, WSGI, CGI: HTTP_X_FORWARDED_FOR) takes both
// spellings for one name, and the client's could stand for the edge's
// (Puma's CVE-2024-45614; nginx drops every name with an underscore by
// default). Such fields are not passed on, on any protocol.
func underscoredForwarding(k string) bool {
	if strings.IndexByte(k, '_') < 0 {
		return false
	}
	for _, f := range [...]string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"} {
		if underscored(k, f) {
			return true
		}
	}
	return false
}

// underscored reports whether name is f in any case, with an
// underscore for any of its dashes.
func underscored(name, f string) bool {
	if len(name) != len(f) {
		return false
	}
	for i := range len(name) {
		if !foldedByte(name[i], f[i]) {
			return false
		}
	}
	return true
}

// b2s is b as a string without a copy, for a call that copies it (the
// bytes must not change while the string is in use).
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// s2b is s as bytes without a copy, for a call that copies them and
// never writes to them.
func s2b(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func (s *Server) upstreamError(ctx *fasthttp.RequestCtx, d *view.Domain, err error) {
	status, title, msg := s.upstreamFailed(d, err)
	page(ctx, status, title, msg)
}

// upstreamFailed logs a failed exchange with d's upstream and says what
// the client is answered: 504 when it timed out, 502 otherwise.
func (s *Server) upstreamFailed(d *view.Domain, err error) (status int, title, msg string) {
	if errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrDialTimeout) {
		s.d.Log.Warn("upstream timed out", "domain", d.Name, "hash", short(d.Hash), "err", err)
		return fasthttp.StatusGatewayTimeout, "Gateway Timeout", d.Name + " did not answer in time."
	}
	s.d.Log.Warn("upstream unreachable", "domain", d.Name, "hash", short(d.Hash), "err", brief(err))
	return fasthttp.StatusBadGateway, "Bad Gateway", d.Name + " cannot be reached through its tunnel: " + brief(err)
}

// brief is err's text without the bytes fasthttp quotes after a head it
// could not read (", contents: " and up to 4 KiB of the head): an
// upstream's answer, or a client's request, repeated into the log and
// the error page. fasthttp leaves them out itself when told to
// (SecureErrorLogMessage, set on the edge's servers and its upstreams'
// clients), but not for a head read outside its client, as the
// HTTP/2 pool's exchange reads it; and some of its errors quote the
// whole head whatever it is told, within the message ("cannot find
// whitespace in the first line of request %q": a request line without
// its second space had the 400 and the log repeat the request's
// cookies and credentials). A quoted head is told by the line break
// it holds (written \n by %q); it is left out, its quotes and all.
func brief(err error) string {
	s := err.Error()
	if i := strings.Index(s, ", contents: "); i >= 0 {
		s = s[:i]
	}
	if !strings.Contains(s, `\n`) {
		return s
	}
	var b strings.Builder
	for {
		open := strings.IndexByte(s, '"')
		if open < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := quoteEnd(s, open+1)
		if end < 0 { // not ended: up to the end
			end = len(s) - 1
		}
		b.WriteString(s[:open])
		if q := s[open : end+1]; strings.Contains(q, `\n`) {
			b.WriteString("(head left out)")
		} else {
			b.WriteString(q)
		}
		s = s[end+1:]
	}
}

// briefLogger is fasthttp's logger for the edge's servers: the errors
// it is given (a connection it gave up on, with the error its answer
// quoted) briefed, as in the answers.
type briefLogger struct{ httpx.Logger }

func (l briefLogger) Printf(format string, args ...any) {
	for i, a := range args {
		if err, ok := a.(error); ok {
			args[i] = brief(err)
		}
	}
	l.Logger.Printf(format, args...)
}

// quoteEnd is the index in s of the quote that ends the Go-quoted
// string whose text starts at i, or -1.
func quoteEnd(s string, i int) int {
	for ; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // an escape: the next byte is not the end
		case '"':
			return i
		}
	}
	return -1
}

func short(h string) string {
	h = strings.TrimPrefix(h, "hs://")
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func isUpgrade(ctx *fasthttp.RequestCtx) bool {
	return strings.EqualFold(string(ctx.Request.Header.Peek("Upgrade")), "websocket") &&
		strings.Contains(strings.ToLower(string(ctx.Request.Header.Peek("Connection"))), "upgrade")
}

// websocket passes an upgrade through: the request goes to the upstream
// on a connection of its own; once the upstream answers 101 (the head
// reaches the client as it came), bytes flow both ways until either side
// closes. Any other answer (a 403, a 404, a 426) goes back as an answer
// and the client's connection stays HTTP: piping it anyway would let the
// client speak to the upstream past the edge (requests not logged,
// not forwarded, not checked: WebSocket smuggling). The request must
// be taken and the status line come within UpstreamTimeout each; a
// refusal's body is read up to maxRefusalBody. The request goes with
// its hop-by-hop headers dropped as any other (prepare), but for the two
// that ask for the upgrade, written anew: "Connection: Upgrade" and "Upgrade: websocket" (as
// nginx's WebSocket setup sends them). A Proxy-Authorization meant for a
// proxy in front of the edge, a Keep-Alive or TE of the client's hop,
// and the fields its Connection header named reached the upstream on
// this path only.
func (s *Server) websocket(ctx *fasthttp.RequestCtx, d *view.Domain, names headNames) {
	up, err := s.dial(d.Hash)
	if err == nil && d.SSL {
		up, err = tlsUpstream(up, d)
	}
	if err != nil {
		s.upstreamError(ctx, d, err)
		return
	}
	req := &ctx.Request
	prepare(ctx, req, names)
	req.Header.SetCanonical(strConnection, strUpgrade)
	req.Header.SetCanonical(strUpgradeName, strWebsocket)
	// The request must be taken within UpstreamTimeout, as its answer
	// must come: an upstream that reads nothing would hold a write of a
	// request longer than the socket buffers (one with a body) for as
	// long as it kept the connection. (Its body comes within the client's
	// ReadTimeout, shorter, so a deadline over the whole write cuts no
	// body that is still coming.)
	_ = up.SetWriteDeadline(time.Now().Add(s.d.UpstreamTimeout))
	w := bufio.NewWriter(up)
	err = req.Write(w)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		up.Close()
		s.upstreamError(ctx, d, timedOut(err))
		// The body may be partly read: its rest is not a next request
		// (Write closed its stream, so answer cannot tell).
		closeAfter(ctx)
		return
	}
	_ = up.SetReadDeadline(time.Now().Add(s.d.UpstreamTimeout))
	br := bufio.NewReaderSize(up, 4<<10)
	ok, err := switched(br)
	if err != nil {
		up.Close()
		s.upstreamError(ctx, d, timedOut(err))
		return
	}
	if !ok {
		// Read into a response of its own: the server's carries its
		// NoDefaultDate, and the answer then went without a Date when the
		// upstream sent none; copied, it gets the edge's own, as every
		// answer does.
		refusal := fasthttp.AcquireResponse()
		err := readAnswer(refusal, br, maxRefusalBody)
		up.Close()
		if err != nil {
			fasthttp.ReleaseResponse(refusal)
			s.upstreamError(ctx, d, timedOut(err))
			return
		}
		refusal.CopyTo(&ctx.Response)
		fasthttp.ReleaseResponse(refusal)
		finish(ctx, &ctx.Response)
		return
	}
	_ = up.SetReadDeadline(time.Time{})
	_ = up.SetWriteDeadline(time.Time{})
	ctx.HijackSetNoResponse(true)
	ctx.SetStatusCode(fasthttp.StatusSwitchingProtocols) // for the access log
	ctx.Hijack(func(c net.Conn) {
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(up, c); closeWrite(up); done <- struct{}{} }()
		// br still holds the 101's head, unread: it goes first.
		go func() { _, _ = io.Copy(c, br); closeWrite(c); done <- struct{}{} }()
		<-done
		<-done
		up.Close()
		c.Close()
	})
}

// maxRefusalBody bounds the body of an upstream's answer to an upgrade
// that it refused (an error page).
const maxRefusalBody = 1 << 20

// switched looks at the status line of the answer coming on br, without
// taking it: whether it is a 101 (Switching Protocols), "HTTP/1.x 101"
// and a space or the line's end. Informational answers before it (a
// 100 Continue, a 103 Early Hints) are read past and not passed on, as
// readHead reads past them, and at most as many; a 101 after them was
// refused as not asked for.
func switched(br *bufio.Reader) (bool, error) {
	for range 100 {
		p, err := br.Peek(len("HTTP/1.1 101 "))
		if err != nil {
			return false, err
		}
		if !bytes.HasPrefix(p, []byte("HTTP/1.")) || p[8] != ' ' || p[12] != ' ' && p[12] != '\r' && p[12] != '\n' {
			return false, nil
		}
		switch code := p[9:12]; {
		case string(code) == "101":
			return true, nil
		case code[0] != '1' || !isDigit(code[1]) || !isDigit(code[2]):
			return false, nil
		}
		var h fasthttp.ResponseHeader
		if _, err := readBigHead(&h, br); err != nil { // the one head, in lines
			return false, err
		}
	}
	return false, errTooManyInformational
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
