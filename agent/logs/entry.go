package logs

import (
	"strings"
	"time"
)

// Entry is one log line of any source.
type Entry struct {
	// Seq orders the entries of a ring (audit, anomaly); 0 for the journal,
	// whose own cursor is in Cursor.
	Seq      uint64
	Cursor   string // the journal's __CURSOR (journal only)
	Time     time.Time
	Priority int    // syslog: 0 emerg .. 7 debug; set it (the zero value is emerg)
	Unit     string // the systemd unit, or the audit action's subsystem
	Message  string
	Fields   map[string]string // extra fields worth showing (small)
}

// Syslog priorities (RFC 5424 §6.2.1 severities).
const (
	PriEmerg = iota
	PriAlert
	PriCrit
	PriErr
	PriWarning
	PriNotice
	PriInfo
	PriDebug
)

var severities = [...]string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"}

// Severity is the name of a priority ("info" for anything out of range).
func Severity(p int) string {
	if p >= 0 && p < len(severities) {
		return severities[p]
	}
	return "info"
}

// ParsePriority reads a priority as a number 0-7 or a name (emerg, alert,
// crit, err/error, warning/warn, notice, info, debug).
func ParsePriority(s string) (int, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) == 1 && s[0] >= '0' && s[0] <= '7' {
		return int(s[0] - '0'), true
	}
	switch s {
	case "error":
		return PriErr, true
	case "warn":
		return PriWarning, true
	case "panic":
		return PriEmerg, true
	}
	for i, n := range severities {
		if s == n {
			return i, true
		}
	}
	return 0, false
}

// matches applies a query's filters other than the cursor: the time
// window, the maximum priority, the unit and the substring q
// (case-insensitive, over message, unit and severity).
func (q *Query) matches(e *Entry) bool {
	if !q.Since.IsZero() && e.Time.Before(q.Since) {
		return false
	}
	if !q.Until.IsZero() && e.Time.After(q.Until) {
		return false
	}
	if q.Priority >= 0 && e.Priority > q.Priority {
		return false
	}
	if q.Unit != "" && !strings.EqualFold(e.Unit, q.Unit) {
		return false
	}
	if q.Q != "" && !containsFold(e.Message, q.Q) && !containsFold(e.Unit, q.Q) && !containsFold(Severity(e.Priority), q.Q) {
		return false
	}
	return true
}

// containsFold is a case-insensitive substring test; sub is lower case.
func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), sub)
}
