package proxy

import (
	"strconv"
	"strings"
	"time"
	"unsafe"

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
// host is the request's Host as a string (serve has made it already).
func (s *Server) logRequest(ctx *fasthttp.RequestCtx, host string, status int, at time.Time, dur time.Duration, upstream string) {
	s.sendAccess(accessLine{method: methodString(ctx.Method()), host: host, path: string(ctx.Path()),
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
// batches of at most accessBatch lines.
func (s *Server) writeAccessBatch(first accessLine) {
	batch := make([]*messages.LogLine, 1, accessBatch)
	batch[0] = first.format()
	for {
		select {
		case m := <-s.access:
			batch = append(batch, m.format())
			if len(batch) == accessBatch {
				s.d.AccessBatch(batch)
				batch = make([]*messages.LogLine, 0, accessBatch)
			}
			continue
		default:
		}
		break
	}
	if len(batch) > 0 {
		s.d.AccessBatch(batch)
	}
}

// format renders the line as the log channels do (slog's text form).
// One allocation for the text, sized for a line with a tunnel upstream
// (hs:// and 64 hex digits: ~220 bytes), and one for the LogLine.
func (l accessLine) format() *messages.LogLine {
	b := make([]byte, 0, 256)
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
	b = appendValue(b, l.upstream)
	// b is not touched again: the string shares its bytes (as
	// strings.Builder does) instead of copying them.
	return &messages.LogLine{Channel: "httpProxy", Level: "INFO", Time: l.at, Message: unsafe.String(unsafe.SliceData(b), len(b))}
}

// appendValue quotes a value the way slog's text handler does when it
// has to (empty, spaces, quotes, '=' or control characters).
func appendValue(b []byte, v string) []byte {
	if v == "" || strings.ContainsAny(v, " \"=\\") || strings.IndexFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return strconv.AppendQuote(b, v)
	}
	return append(b, v...)
}
