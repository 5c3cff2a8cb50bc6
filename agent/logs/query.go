package logs

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Query is a parsed /api/vN/logs request.
type Query struct {
	Source   string    // journal (default), anomaly or audit
	Q        string    // lower-cased substring of message, unit or severity
	Since    time.Time // zero: no lower bound
	Until    time.Time // zero: no upper bound
	Priority int       // maximum priority shown; -1: all
	Unit     string
	Limit    int
	Cursor   Cursor // where the previous page ended; zero: from the newest
}

// Cursor is where a page ended: the sequence of its oldest entry (rings)
// or the journal's cursor of it. It travels as opaque base64url text.
type Cursor struct {
	Source  string
	Seq     uint64
	Journal string
}

// IsZero reports a query from the newest entry.
func (c Cursor) IsZero() bool { return c.Seq == 0 && c.Journal == "" }

// Encode is the cursor's text for the next page's request.
func (c Cursor) Encode() string {
	v := strconv.FormatUint(c.Seq, 10)
	if c.Source == SourceJournal {
		v = c.Journal
	}
	return base64.RawURLEncoding.EncodeToString([]byte(c.Source + ":" + v))
}

// The sources.
const (
	SourceJournal = "journal"
	SourceAnomaly = "anomaly"
	SourceAudit   = "audit"
)

// Limits of a query.
const (
	DefaultLimit = 200
	MaxLimit     = 2000
	maxQ         = 1024 // bytes of q, unit or a time
	maxCursor    = 1024
)

// Getter returns a query argument and whether it was present.
type Getter func(key string) (string, bool)

// ParseQuery reads the arguments against now (for relative times). The
// error names the argument; the API answers it with 400.
func ParseQuery(get Getter, now time.Time) (Query, error) {
	q := Query{Source: SourceJournal, Priority: -1, Limit: DefaultLimit}
	arg := func(k string) (string, bool, error) {
		v, ok := get(k)
		if ok && len(v) > maxQ && k != "cursor" {
			return "", false, fmt.Errorf("%s is longer than %d bytes", k, maxQ)
		}
		return v, ok && v != "", nil
	}
	v, ok, err := arg("source")
	if err != nil {
		return q, err
	}
	if ok {
		switch s := strings.ToLower(v); s {
		case SourceJournal, SourceAnomaly, SourceAudit:
			q.Source = s
		default:
			return q, fmt.Errorf("source must be journal, anomaly or audit, got %q", trim(v))
		}
	}
	if v, ok, err = arg("q"); err != nil {
		return q, err
	} else if ok {
		q.Q = strings.ToLower(v)
	}
	if v, ok, err = arg("unit"); err != nil {
		return q, err
	} else if ok {
		// The unit is one journalctl argument: a NUL cannot be passed
		// (exec refuses it) and no unit name has control characters.
		if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return q, fmt.Errorf("unit must not contain control characters, got %q", trim(v))
		}
		q.Unit = v
	}
	if v, ok, err = arg("priority"); err != nil {
		return q, err
	} else if ok {
		p, good := ParsePriority(v)
		if !good {
			return q, fmt.Errorf("priority must be 0-7 or a name (emerg, alert, crit, err, warning, notice, info, debug), got %q", trim(v))
		}
		q.Priority = p
	}
	for _, k := range []string{"since", "until"} {
		v, ok, err := arg(k)
		if err != nil {
			return q, err
		}
		if !ok {
			continue
		}
		t, err := ParseTime(v, now)
		if err != nil {
			return q, fmt.Errorf("%s: %w", k, err)
		}
		if k == "since" {
			q.Since = t
		} else {
			q.Until = t
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Since.After(q.Until) {
		return q, fmt.Errorf("since (%s) is later than until (%s)", q.Since.UTC().Format(time.RFC3339), q.Until.UTC().Format(time.RFC3339))
	}
	if v, ok := get("limit"); ok && v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > MaxLimit {
			return q, fmt.Errorf("limit must be an integer from 1 to %d, got %q", MaxLimit, trim(v))
		}
		q.Limit = n
	}
	if v, ok := get("cursor"); ok && v != "" {
		c, err := decodeCursor(v)
		if err != nil {
			return q, err
		}
		if c.Source != q.Source {
			return q, fmt.Errorf("cursor belongs to source %s, not %s", c.Source, q.Source)
		}
		q.Cursor = c
	}
	return q, nil
}

var errCursor = errors.New("cursor does not decode: pass next_cursor from the previous page unchanged")

func decodeCursor(s string) (Cursor, error) {
	if len(s) > maxCursor {
		return Cursor{}, errCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return Cursor{}, errCursor
	}
	src, v, ok := strings.Cut(string(b), ":")
	if !ok || v == "" {
		return Cursor{}, errCursor
	}
	c := Cursor{Source: src}
	switch src {
	case SourceJournal:
		// A journald cursor is "s=...;i=...;b=...;m=...;t=...;x=...":
		// printable, no spaces; it is passed to journalctl as one argument.
		for i := 0; i < len(v); i++ {
			if v[i] <= ' ' || v[i] > '~' {
				return Cursor{}, errCursor
			}
		}
		c.Journal = v
	case SourceAnomaly, SourceAudit:
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			return Cursor{}, errCursor
		}
		c.Seq = n
	default:
		return Cursor{}, errCursor
	}
	return c, nil
}

// ParseTime reads since/until in the forms the spec lists: absolute unix
// seconds or milliseconds (numbers above 1e11 are milliseconds), ISO 8601
// (RFC 3339 with or without fractional seconds or zone, or a date), a
// relative duration back from now ("-1h", "-30m", "-2d", "-1w", "-90s",
// or a negative number of seconds, as the data API takes), or "now".
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "now") {
		return now, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		switch {
		case n < -maxRelative:
			// Past ten years back, n seconds would overflow a Duration
			// and wrap into the future.
			return time.Time{}, fmt.Errorf("%q is more than ten years back", trim(s))
		case n <= 0:
			return now.Add(time.Duration(n) * time.Second), nil
		case n > 1e11:
			return time.UnixMilli(n), nil
		}
		return time.Unix(n, 0), nil
	}
	if strings.HasPrefix(s, "-") {
		if d, ok := relative(s[1:]); ok {
			return now.Add(-d), nil
		}
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not unix seconds or ms, ISO 8601, or relative like -1h", trim(s))
}

// relative reads "90s", "30m", "1h", "2d", "1w" or a Go duration
// ("1h30m"); at most ten years.
func relative(s string) (time.Duration, bool) {
	if s == "" {
		return 0, false
	}
	unit := map[byte]time.Duration{'d': 24 * time.Hour, 'w': 7 * 24 * time.Hour}[s[len(s)-1]]
	var d time.Duration
	if unit != 0 {
		n, err := strconv.ParseFloat(s[:len(s)-1], 64)
		if err != nil || !(n >= 0 && n <= 520) { // NaN is neither
			return 0, false
		}
		d = time.Duration(n * float64(unit))
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d < 0 {
			return 0, false
		}
	}
	return d, d <= maxRelative*time.Second
}

// maxRelative bounds a relative time, in seconds: ten years.
const maxRelative = 10 * 365 * 24 * 3600

func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
