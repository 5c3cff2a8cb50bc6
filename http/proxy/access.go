package proxy

import (
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/messages"
)

type accessLine struct {
	method, host, path, upstream string
	status, bytes                int
	dur                          time.Duration
}

// logRequest hands the request's access line to the writer goroutine;
// when its buffer is full the line is dropped and counted.
func (s *Server) logRequest(ctx *fasthttp.RequestCtx, status int, dur time.Duration, upstream string) {
	l := accessLine{method: string(ctx.Method()), host: string(ctx.Host()), path: string(ctx.Path()),
		upstream: upstream, status: status, bytes: len(ctx.Response.Body()), dur: dur}
	select {
	case s.access <- l:
	default:
		s.dropped.Add(1)
	}
}

// logAccess writes the access lines: with Deps.AccessBatch, up to 256
// lines at a time as one batch (one message and one file write for a
// burst of requests), else one slog record each.
func (s *Server) logAccess() {
	defer close(s.accessDone)
	batch := make([]*messages.LogLine, 0, 256)
	for l := range s.access {
		if s.d.AccessBatch == nil {
			s.d.Access.Info("request", "method", l.method, "host", l.host, "path", l.path, "status", l.status,
				"bytes", l.bytes, "ms", l.dur.Milliseconds(), "upstream", l.upstream)
			continue
		}
		batch = append(batch[:0], l.format())
	more:
		for len(batch) < cap(batch) {
			select {
			case m, ok := <-s.access:
				if !ok {
					break more
				}
				batch = append(batch, m.format())
			default:
				break more
			}
		}
		s.d.AccessBatch(append([]*messages.LogLine(nil), batch...))
	}
}

// format renders the line as the log channels do (slog's text form).
func (l accessLine) format() *messages.LogLine {
	now := time.Now()
	b := make([]byte, 0, 160)
	b = append(b, "time="...)
	b = now.AppendFormat(b, time.RFC3339Nano)
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
	return &messages.LogLine{Channel: "httpProxy", Level: "INFO", Time: now, Message: string(b)}
}

// appendValue quotes a value the way slog's text handler does when it
// has to (empty, spaces, quotes, '=' or control characters).
func appendValue(b []byte, v string) []byte {
	if v == "" || strings.ContainsAny(v, " \"=\\") || strings.IndexFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return strconv.AppendQuote(b, v)
	}
	return append(b, v...)
}
