package h2srv

import (
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// commonFields are the field names clients and handlers use most: the
// tables below turn a request's lowercase wire name into its canonical
// key and a response's canonical key into its wire name without
// allocating.
var commonFields = []string{
	"Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language", "Accept-Ranges",
	"Access-Control-Allow-Credentials", "Access-Control-Allow-Headers", "Access-Control-Allow-Methods",
	"Access-Control-Allow-Origin", "Access-Control-Expose-Headers", "Access-Control-Max-Age",
	"Access-Control-Request-Headers", "Access-Control-Request-Method", "Age", "Allow",
	"Authorization", "Cache-Control", "Content-Disposition", "Content-Encoding", "Content-Language",
	"Content-Length", "Content-Location", "Content-Range", "Content-Type", "Cookie", "Date", "Etag",
	"Expect", "Expires", "Forwarded", "From", "Grpc-Encoding", "Grpc-Accept-Encoding", "Grpc-Message",
	"Grpc-Status", "Grpc-Timeout", "Host", "If-Match", "If-Modified-Since", "If-None-Match",
	"If-Range", "If-Unmodified-Since", "Last-Modified", "Link", "Location", "Max-Forwards", "Origin",
	"Pragma", "Priority", "Proxy-Authenticate", "Proxy-Authorization", "Range", "Referer", "Refresh",
	"Retry-After", "Sec-Fetch-Dest", "Sec-Fetch-Mode", "Sec-Fetch-Site", "Sec-Fetch-User",
	"Sec-Ch-Ua", "Sec-Ch-Ua-Mobile", "Sec-Ch-Ua-Platform", "Server", "Set-Cookie",
	"Strict-Transport-Security", "Te", "Trailer", "Upgrade-Insecure-Requests", "User-Agent", "Vary",
	"Via", "Www-Authenticate", "X-Content-Type-Options", "X-Forwarded-For", "X-Forwarded-Host",
	"X-Forwarded-Proto", "X-Frame-Options", "X-Real-Ip", "X-Request-Id", "X-Xss-Protection",
}

var (
	canonicalOf = make(map[string]string, len(commonFields)) // wire (lowercase) -> canonical
	wireOf      = make(map[string]string, len(commonFields)) // canonical -> wire
)

func init() {
	for _, k := range commonFields {
		l := strings.ToLower(k)
		canonicalOf[l] = k
		wireOf[k] = l
	}
}

// canonicalKey is the http.Header key of a request field's wire name
// (HPACK names are lowercase: the Framer refuses any other).
func canonicalKey(wire string) string {
	if k, ok := canonicalOf[wire]; ok {
		return k
	}
	return textproto.CanonicalMIMEHeaderKey(wire)
}

// wireName is the lowercase name a response field is sent under.
func wireName(key string) string {
	if w, ok := wireOf[key]; ok {
		return w
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(key)
		}
	}
	return key
}

// connectionSpecific reports the fields RFC 9113 §8.2.2 forbids in
// HTTP/2 (wire names). TE is handled apart: "trailers" is allowed.
func connectionSpecific(wire string) bool {
	switch wire {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		return true
	}
	return false
}

// dateValue is the Date field value of one second; dateCache holds the
// current second's, so that a response does not format one.
type dateValue struct {
	sec int64
	val string
}

var dateCache atomic.Pointer[dateValue]

func httpDate() string {
	now := time.Now()
	sec := now.Unix()
	if d := dateCache.Load(); d != nil && d.sec == sec {
		return d.val
	}
	d := &dateValue{sec: sec, val: now.UTC().Format(http.TimeFormat)}
	dateCache.Store(d)
	return d.val
}

// statusText holds the :status values 100-599 as strings.
var statusText [600]string

func init() {
	for i := 100; i < len(statusText); i++ {
		statusText[i] = strconv.Itoa(i)
	}
}

func statusString(code int) string {
	if code >= 100 && code < len(statusText) {
		return statusText[code]
	}
	return strconv.Itoa(code)
}

// bodyAllowed reports whether a response with this status may have a
// body (RFC 9110 §6.4.1).
func bodyAllowed(status int) bool {
	switch {
	case status >= 100 && status <= 199:
		return false
	case status == 204, status == 304:
		return false
	}
	return true
}
