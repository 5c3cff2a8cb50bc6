package api

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
)

// hostPrefix is Netdata's host switch: /host/<hostname or machine
// GUID>/<path> answers <path> for that host. Its dashboard builds such
// URLs from info's mirrored_hosts, and scripts written against a Netdata
// parent read its children through them.
var hostPrefix = []byte("/host/")

// hostSwitch strips a /host/<name>/ prefix from the request's path and
// returns the handler that answers for name: nil for this agent (the
// caller routes the rest of the path), a child's handler in parent mode,
// or a 404 error with Netdata's words for a host this agent does not
// keep. ok is false when the path has no such prefix.
func (s *Server) hostSwitch(ctx *fasthttp.RequestCtx) (h fasthttp.RequestHandler, ok bool, err error) {
	rest, found := bytes.CutPrefix(ctx.Path(), hostPrefix)
	if !found {
		return nil, false, nil
	}
	name, sub, _ := bytes.Cut(rest, []byte("/"))
	host := string(name)
	ctx.URI().SetPathBytes(append([]byte("/"), sub...))
	if s.isSelf(host) {
		return nil, true, nil
	}
	if s.o.Fleet != nil {
		if h, ok := s.o.Fleet.Handler(host); ok {
			return h, true, nil
		}
	}
	return nil, true, httpx.Errorf(fasthttp.StatusNotFound, "This netdata does not maintain a database for host: %s", trimArg(host))
}
