package proxy

import (
	"time"

	"github.com/valyala/fasthttp"
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

func (s *Server) logAccess() {
	defer close(s.accessDone)
	for l := range s.access {
		s.d.Access.Info("request", "method", l.method, "host", l.host, "path", l.path, "status", l.status,
			"bytes", l.bytes, "ms", l.dur.Milliseconds(), "upstream", l.upstream)
	}
}
