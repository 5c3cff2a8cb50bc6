package logs

import (
	"context"
	"errors"
)

// Page is one answer: entries newest first, and the cursor of the next
// (older) page when there is one.
type Page struct {
	Source    string
	Entries   []Entry
	Next      Cursor // zero when nothing older matches
	More      bool   // older matching entries exist
	Truncated bool   // a q search stopped at MaxScan entries; Next continues it
}

// Errors for sources that are not there; the API answers them with 503
// and the error's text.
var (
	ErrJournalOff = errors.New("the journal source is turned off on this agent (AGENT_JOURNAL=0)")
	ErrNoAnomaly  = errors.New("no anomaly detector running on this agent, so there are no anomaly events")
)

// Reader answers a Query from its source.
type Reader struct {
	Journal *Journal // nil: turned off (AGENT_JOURNAL=0)
	Audit   Source   // the agent's audit trail
	Anomaly Source   // the anomaly detector's events; nil: none running
}

// Read returns one page of q.
func (r *Reader) Read(ctx context.Context, q Query) (Page, error) {
	switch q.Source {
	case SourceJournal:
		if r.Journal == nil {
			return Page{}, ErrJournalOff
		}
		return r.Journal.Read(ctx, q)
	case SourceAnomaly:
		if r.Anomaly == nil {
			return Page{}, ErrNoAnomaly
		}
		return readSeq(r.Anomaly, q), nil
	case SourceAudit:
		if r.Audit == nil {
			return Page{}, errors.New("no audit trail is kept by this agent")
		}
		return readSeq(r.Audit, q), nil
	}
	return Page{}, errors.New("unknown source " + q.Source)
}

// readSeq pages a sequence-numbered source: entries older than the
// cursor, so entries added meanwhile never shift a page.
func readSeq(s Source, q Query) Page {
	es, more := s.Before(q.Cursor.Seq, q.Limit, q.matches)
	p := Page{Source: q.Source, Entries: es, More: more}
	if p.Entries == nil {
		p.Entries = []Entry{}
	}
	if more && len(es) > 0 {
		p.Next = Cursor{Source: q.Source, Seq: es[len(es)-1].Seq}
	}
	return p
}
