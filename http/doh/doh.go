// Package doh serves DNS over HTTPS (RFC 8484) at /dns-query: GET with
// the query in the base64url `dns` parameter, POST with an
// application/dns-message body. Queries are answered by the node's DNS
// server (dns.Server.Exchange), the same answer path as UDP and TCP; this
// package only decodes HTTP and encodes the reply.
//
// The edge proxy reaches it through the admin domain
// (https://admin.p2p/dns-query), and the admin server takes this one path
// before its browser guard: a DoH request names application/dns-message,
// not JSON, and answering one changes nothing (see http/admin, Deps.DoH).
//
// Statuses: 200 with the DNS reply (any RCODE, as RFC 8484 §4.2.1 says);
// 400 for a missing or non-base64url `dns`, or a message that is not a
// DNS query; 413 for a body over 65,535 bytes (the largest DNS message),
// 414 for a `dns` longer than such a message encodes to; 415 for a POST
// without Content-Type application/dns-message;
// 405 for other methods. The package must never answer from anything but
// the DNS server.
//
// Padding: an answer to a query that carries the EDNS(0) Padding option
// (Firefox and Chromium pad theirs) is padded to a multiple of padding.Block
// bytes, as RFC 7830 §4 requires of a responder and RFC 8467 §4.1
// recommends; an answer to any other query is sent as it is. The option
// is found and added on the wire, without unpacking either message.
package doh

import (
	"context"
	"encoding/base64"
	"errors"
	"mime"
	"net/netip"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/dns/padding"
)

// Path is where DoH is served (RFC 8484 §3 leaves it to the server; this
// is the conventional one).
const Path = "/dns-query"

// ContentType is the DoH media type (RFC 8484 §6).
const ContentType = "application/dns-message"

// MaxMessage is the largest DNS message (a 16-bit length over TCP).
const MaxMessage = 65535

// Answerer answers one query in wire format (dns.Server.Exchange).
type Answerer interface {
	Exchange(ctx context.Context, query []byte, client netip.Addr) (reply []byte, minTTL uint32, err error)
}

// Timeout bounds one query (upstream forwarding included).
const Timeout = 5 * time.Second

// Handler serves DoH with a.
func Handler(a Answerer) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		q, status, msg := Decode(ctx)
		if status != 0 {
			ctx.Error(msg, status) // a fresh response: headers set before it are gone
			if status == fasthttp.StatusMethodNotAllowed {
				ctx.Response.Header.Set("Allow", Allow) // RFC 9110 §15.5.6
			}
			return
		}
		c, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		client, _ := netip.AddrFromSlice(ctx.RemoteIP())
		reply, ttl, err := a.Exchange(c, q, client)
		if err != nil {
			ctx.Error(err.Error(), fasthttp.StatusBadRequest)
			return
		}
		if padding.Padded(q) {
			reply = padding.Pad(reply)
		}
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetContentType(ContentType)
		// RFC 8484 §5.1: the freshness lifetime is the smallest TTL.
		ctx.Response.Header.Set("Cache-Control", "max-age="+strconv.FormatUint(uint64(ttl), 10))
		ctx.SetBody(reply)
	}
}

var errNotBase64URL = errors.New("the dns parameter is not base64url")

// Decode reads the DNS query of a DoH request. status is 0 on success,
// else the HTTP status to answer with and msg the reason. The query may
// alias ctx's buffers: use it before the handler returns.
func Decode(ctx *fasthttp.RequestCtx) (query []byte, status int, msg string) {
	switch {
	case ctx.IsGet() || ctx.IsHead():
		v := ctx.QueryArgs().Peek("dns")
		if len(v) == 0 {
			return nil, fasthttp.StatusBadRequest, "missing the dns parameter (base64url DNS query)"
		}
		if len(v) > base64.RawURLEncoding.EncodedLen(MaxMessage) {
			return nil, fasthttp.StatusRequestURITooLong, "the dns parameter is longer than a DNS message can be"
		}
		q, err := DecodeParam(v)
		if err != nil {
			return nil, fasthttp.StatusBadRequest, err.Error()
		}
		return q, 0, ""
	case ctx.IsPost():
		mt, _, err := mime.ParseMediaType(string(ctx.Request.Header.ContentType()))
		if err != nil || mt != ContentType {
			return nil, fasthttp.StatusUnsupportedMediaType, "Content-Type must be " + ContentType
		}
		if ctx.Request.Header.ContentLength() > MaxMessage {
			return nil, fasthttp.StatusRequestEntityTooLarge, "a DNS message is at most 65535 bytes"
		}
		body := ctx.PostBody()
		if len(body) > MaxMessage {
			return nil, fasthttp.StatusRequestEntityTooLarge, "a DNS message is at most 65535 bytes"
		}
		if len(body) == 0 {
			return nil, fasthttp.StatusBadRequest, "empty body: a DNS query expected"
		}
		return body, 0, ""
	}
	return nil, fasthttp.StatusMethodNotAllowed, "DoH takes GET or POST"
}

// Allow is the methods DoH takes, for a 405's Allow header. HEAD is a
// GET without the body.
const Allow = "GET, HEAD, POST"

// DecodeParam decodes a GET dns parameter: base64url without padding
// (RFC 8484 §4.1); padding is tolerated, as several clients send it.
func DecodeParam(v []byte) ([]byte, error) {
	for len(v) > 0 && v[len(v)-1] == '=' {
		v = v[:len(v)-1]
	}
	out := make([]byte, base64.RawURLEncoding.DecodedLen(len(v)))
	n, err := base64.RawURLEncoding.Decode(out, v)
	if err != nil {
		return nil, errNotBase64URL
	}
	if n == 0 {
		return nil, errNotBase64URL
	}
	return out[:n], nil
}
