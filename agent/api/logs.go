package api

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/logs"
	"peerdns/http/httpx"
)

// logEntry is one entry of a /logs answer.
type logEntry struct {
	Cursor    string            `json:"cursor"` // pass as cursor to continue after this entry
	Timestamp string            `json:"timestamp"`
	TimeMS    int64             `json:"time_ms"`
	Priority  int               `json:"priority"`
	Severity  string            `json:"severity"`
	Unit      string            `json:"unit"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields,omitempty"`
}

// logsTimeout bounds one logs request (journalctl included); shorter than
// the server's write timeout so the client gets the error body.
const logsTimeout = 8 * time.Second

// logs is /api/vN/logs: source (journal, anomaly, audit), q, since,
// until, priority, unit, limit and cursor (agent/logs has the rules). The
// answer is {source, count, entries, next_cursor, more, truncated};
// next_cursor is null on the last page. A source that is not there (the
// journal turned off or missing, no anomaly detector) is a 503 that says
// which, as is a child's log of any source asked of its parent (the logs
// stay on the child).
func (s *Server) logs(ctx *fasthttp.RequestCtx, _ int) error {
	q, err := logs.ParseQuery(func(k string) (string, bool) { return arg(ctx, k) }, s.now())
	if err != nil {
		return httpx.BadRequest("%v", err)
	}
	if err := s.keptByChild(q.Source+" log", fasthttp.StatusServiceUnavailable); err != nil {
		return err
	}
	// The journal and the audit trail are the machine's own records: no
	// web page reads them, whatever CORS allows. The anomaly log is the
	// detector's, as open as the metrics it is about.
	if q.Source != logs.SourceAnomaly {
		if err := s.localOnly(ctx, "logs?source="+q.Source, "read them with curl, a script or the agent's RPC"); err != nil {
			return err
		}
	}
	c, cancel := context.WithTimeout(context.Background(), logsTimeout)
	defer cancel()
	p, err := s.logReader.Read(c, q)
	switch {
	case errors.Is(err, logs.ErrJournalOff), errors.Is(err, logs.ErrNoAnomaly), errors.Is(err, logs.ErrNoJournal):
		return httpx.Errorf(fasthttp.StatusServiceUnavailable, "%v", err)
	case err != nil:
		return httpx.Internal("read %s logs: %v", q.Source, err)
	}
	out := make([]logEntry, len(p.Entries))
	for i, e := range p.Entries {
		cur := logs.Cursor{Source: q.Source, Seq: e.Seq, Journal: e.Cursor}
		out[i] = logEntry{Cursor: cur.Encode(), Timestamp: e.Time.UTC().Format(time.RFC3339Nano), TimeMS: e.Time.UnixMilli(),
			Priority: e.Priority, Severity: logs.Severity(e.Priority), Unit: e.Unit, Message: e.Message, Fields: e.Fields}
	}
	var next any
	if !p.Next.IsZero() {
		next = p.Next.Encode()
	}
	return writeJSON(ctx, map[string]any{
		"source": q.Source, "count": len(out), "entries": out, "next_cursor": next, "more": p.More, "truncated": p.Truncated,
	})
}

// audit records an entry in the agent's audit trail; a failed write is
// logged by the trail and does not fail the request that caused it.
func (s *Server) audit(unit, msg string, fields map[string]string) {
	_ = s.o.Audit.Record(logs.Entry{Priority: logs.PriNotice, Unit: unit, Message: msg, Fields: fields})
}
