package api

import (
	"errors"

	"github.com/valyala/fasthttp"

	"peerdns/agent/procs"
	"peerdns/http/httpx"
)

// processes is /api/vN/processes: the live process table (agent/procs)
// with sort, order, filter, q, limit, offset and pid.
//
// The answer is {time, interval_ms, total, offset, limit, sort, order,
// processes: [{pid, ppid, name, cmdline, user, uid, state, cpu_percent,
// rss_bytes, threads, start_time}]}; total counts the matching rows
// before paging. A pid that is not running is a 404 when it is the only
// one asked for. A parent answering for a child (scope_nodes and the
// other node filters) has no table of the child's: 501.
func (s *Server) processes(ctx *fasthttp.RequestCtx, _ int) error {
	if err := s.keptByChild("process table", fasthttp.StatusNotImplemented); err != nil {
		return err
	}
	// Command lines carry what their programs were given (tokens,
	// passwords): no web page reads them, whatever CORS allows.
	if err := s.localOnly(ctx, "processes", "read the process table with curl, a script or the agent's RPC"); err != nil {
		return err
	}
	q, err := procs.ParseQuery(func(k string) (string, bool) { return arg(ctx, k) })
	if err != nil {
		return httpx.BadRequest("%v", err)
	}
	t, err := s.procs.Table()
	if errors.Is(err, procs.ErrUnsupported) {
		return httpx.Errorf(fasthttp.StatusNotImplemented, "%v", err)
	}
	if err != nil {
		return httpx.Internal("read the process table: %v", err)
	}
	res := q.Apply(t)
	if len(q.PIDs) == 1 && res.Total == 0 {
		return httpx.Errorf(fasthttp.StatusNotFound, "Process %d is not running.", q.PIDs[0])
	}
	order := "asc"
	if q.Desc {
		order = "desc"
	}
	return writeJSON(ctx, map[string]any{
		"time": t.At.Unix(), "interval_ms": t.Interval.Milliseconds(),
		"total": res.Total, "offset": q.Offset, "limit": q.Limit, "sort": q.Sort, "order": order,
		"processes": res.Processes,
	})
}
