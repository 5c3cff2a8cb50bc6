package proxy

import (
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"peerdns/messages"
)

type accessLine struct {
	method, host, path, upstream string
	status, bytes                int
	dur                          time.Duration
	at                           time.Time // when the response was done
}

// logRequest hands the request's access line to the writer goroutine;
// when its buffer is full the line is dropped and counted.
// host and path are the request's as strings (serve has made them).
func (s *Server) logRequest(ctx *fasthttp.RequestCtx, host, path string, status int, at time.Time, dur time.Duration, upstream string) {
	s.sendAccess(accessLine{method: methodString(ctx.Method()), host: host, path: path,
		upstream: upstream, status: status, bytes: bodyBytes(&ctx.Response), dur: dur, at: at})
}

func (s *Server) sendAccess(l accessLine) {
	select {
	case s.access <- l:
	default:
		s.dropped.Add(1)
	}
}

// methods are the common methods' names, so a line about one does not
// allocate its own copy.
var methods = []string{fasthttp.MethodGet, fasthttp.MethodHead, fasthttp.MethodPost, fasthttp.MethodPut,
	fasthttp.MethodPatch, fasthttp.MethodDelete, fasthttp.MethodOptions, fasthttp.MethodConnect, fasthttp.MethodTrace}

func methodString(m []byte) string {
	for _, s := range methods {
		if string(m) == s { // compared without allocating
			return s
		}
	}
	return string(m)
}

// bodyBytes is the response body's length: what is in memory, or for a
// body streamed from the upstream the length it declared (-1: chunked,
// its length is not known before it has passed). Body() would read a
// streamed body into memory, which is what streaming avoids.
func bodyBytes(resp *fasthttp.Response) int {
	if resp.IsBodyStream() {
		return resp.Header.ContentLength()
	}
	return len(resp.Body())
}

// Access-log batching: the writer waits for a line, then sleeps for
// accessLinger while the lines of that spell queue in the channel's
// buffer, then takes them all (up to accessBatch per message) and hands
// them on: a burst costs one message and one file write per batch, and a
// line reaches the channel at most accessLinger late. The writer never
// waits on the channel while a batch is open, so a request that logs
// only copies its line into the buffer; it does not wake the writer (a
// wake per request was a goroutine switch per request on the hot path).
const (
	accessBatch  = 1024
	accessLinger = 10 * time.Millisecond
)

// logAccess writes the access lines: with Deps.AccessBatch in batches
// (above), else one slog record each. The channel is never closed: an
// HTTP/2 or HTTP/3 handler may still finish after Shutdown gave up
// waiting for it, and its line then lands in the buffer (or is dropped)
// instead of sending on a closed channel. Shutdown closes accessStop;
// what is buffered by then is written and the goroutine ends.
func (s *Server) logAccess() {
	defer close(s.accessDone)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		select {
		case l := <-s.access:
			if s.d.AccessBatch == nil {
				s.writeAccessLine(l)
				continue
			}
			linger.Reset(accessLinger)
			select {
			case <-linger.C:
			case <-s.accessStop:
				linger.Stop()
			}
			s.writeAccessBatch(l)
		case <-s.accessStop:
			for {
				select {
				case l := <-s.access:
					if s.d.AccessBatch == nil {
						s.writeAccessLine(l)
					} else {
						s.writeAccessBatch(l)
					}
				default:
					return
				}
			}
		}
	}
}

func (s *Server) writeAccessLine(l accessLine) {
	s.d.Access.Info("request", "method", l.method, "host", l.host, "path", l.path, "status", l.status,
		"bytes", l.bytes, "ms", l.dur.Milliseconds(), "upstream", l.upstream)
}

// writeAccessBatch writes first and what else is buffered now, in
// batches of at most accessBatch lines, each line's text formatted into
// the batch as it is taken from the channel. A batch is used again once
// the channel actor and the WebSocket hub are done with it
// (messages.LogBatch), so a busy edge's access log allocates nothing per
// line. Lines made anew each time are a third of a kilobyte a request,
// most of what a busy node allocates: a collection every few thousand
// requests.
func (s *Server) writeAccessBatch(first accessLine) {
	b := newAccessBatch()
	first.appendTo(b)
	for {
		select {
		case l := <-s.access:
			if l.appendTo(b); b.Len() == accessBatch {
				s.d.AccessBatch(b)
				b = newAccessBatch()
			}
			continue
		default:
		}
		break
	}
	if b.Len() > 0 {
		s.d.AccessBatch(b)
	} else {
		b.Release()
	}
}

func newAccessBatch() *messages.LogBatch { return messages.NewLogBatch("httpProxy", "INFO") }

// appendTo adds the line to b, rendered as the log channels do (slog's
// text form).
func (l accessLine) appendTo(b *messages.LogBatch) {
	b.Text = l.appendText(b.Text)
	b.EndLine(l.at)
}

// appendText appends the line's text to b.
func (l accessLine) appendText(b []byte) []byte {
	b = append(b, "time="...)
	b = l.at.AppendFormat(b, time.RFC3339Nano)
	b = append(b, " level=INFO msg=request method="...)
	b = appendValue(b, l.method)
	b = append(b, " host="...)
	b = appendValue(b, l.host)
	b = append(b, " path="...)
	b = appendValue(b, l.path)
	b = append(b, " status="...)
	b = strconv.AppendInt(b, int64(l.status), 10)
	b = append(b, " bytes="...)
	b = strconv.AppendInt(b, int64(l.bytes), 10)
	b = append(b, " ms="...)
	b = strconv.AppendInt(b, l.dur.Milliseconds(), 10)
	b = append(b, " upstream="...)
	return appendValue(b, l.upstream)
}

// appendValue quotes a value the way slog's text handler does when it
// has to (empty, spaces, quotes, '=', control characters, and text
// beyond ASCII that is not printable or is a space: a client's Host
// holding a right-to-left override would otherwise turn the rest of
// its line around in a terminal or a log viewer). One pass over the
// bytes, a table lookup each (a line's values are about 90 bytes, most
// of them the upstream's hash); only a value with a byte beyond ASCII
// has its runes looked at (quotedRunes).
func appendValue(b []byte, v string) []byte {
	quote := v == ""
	for i := 0; i < len(v); i++ {
		if c := v[i]; quoted[c] {
			quote = c < utf8.RuneSelf || quotedRunes(v[i:])
			break
		}
	}
	if quote {
		return strconv.AppendQuote(b, v)
	}
	return append(b, v...)
}

// quotedRunes reports whether s calls for quotes, rune by rune, as
// slog's text handler judges it.
func quotedRunes(s string) bool {
	for _, r := range s {
		if r < utf8.RuneSelf {
			if quoted[r] {
				return true
			}
			continue
		}
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
	}
	return false
}

// quoted marks the bytes that make appendValue quote a value.
var quoted = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	for _, c := range []byte{0x7f, ' ', '"', '=', '\\'} {
		t[c] = true
	}
	// Beyond ASCII: the value's runes decide (quotedRunes).
	for c := utf8.RuneSelf; c < 256; c++ {
		t[c] = true
	}
	return t
}()
