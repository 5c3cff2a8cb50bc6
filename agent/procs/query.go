package procs

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"peerdns/agent/query"
)

// Query selects, orders and pages rows of a Table (the API's sort, order,
// filter, q, limit, offset and pid).
type Query struct {
	Sort   string // a column: pid, ppid, name, user, state, cpu, rss, threads, start
	Desc   bool
	Filter *query.Pattern // Netdata simple pattern over the name and the command's first word
	Q      string         // lower-cased substring of name, command line or user
	PIDs   []int          // only these pids (nil: all)
	Limit  int
	Offset int
}

// Limits of a query.
const (
	DefaultLimit = 100
	MaxLimit     = 10000
	maxQ         = 256
	maxPIDs      = 100
)

// sortKeys maps a sort name to its comparison and its default order.
var sortKeys = map[string]struct {
	cmp  func(a, b *Process) int
	desc bool
}{
	"pid":     {func(a, b *Process) int { return cmp.Compare(a.PID, b.PID) }, false},
	"ppid":    {func(a, b *Process) int { return cmp.Compare(a.PPID, b.PPID) }, false},
	"name":    {func(a, b *Process) int { return strings.Compare(a.Name, b.Name) }, false},
	"user":    {func(a, b *Process) int { return strings.Compare(a.User, b.User) }, false},
	"state":   {func(a, b *Process) int { return strings.Compare(a.State, b.State) }, false},
	"cpu":     {func(a, b *Process) int { return cmp.Compare(a.CPUPercent, b.CPUPercent) }, true},
	"rss":     {func(a, b *Process) int { return cmp.Compare(a.RSSBytes, b.RSSBytes) }, true},
	"threads": {func(a, b *Process) int { return cmp.Compare(a.Threads, b.Threads) }, true},
	"start":   {func(a, b *Process) int { return cmp.Compare(a.StartTime, b.StartTime) }, true},
}

// sortAliases are the other names a column is asked by.
var sortAliases = map[string]string{
	"cpu_percent": "cpu", "memory": "rss", "rss_bytes": "rss", "mem": "rss",
	"start_time": "start", "started": "start", "command": "name", "cmd": "name",
}

// Getter returns a query argument and whether it was present.
type Getter func(key string) (string, bool)

// ParseQuery reads the API's arguments; the error names the bad one.
func ParseQuery(get Getter) (Query, error) {
	q := Query{Sort: "cpu", Desc: true, Limit: DefaultLimit}
	if v, ok := get("sort"); ok && v != "" {
		k := strings.ToLower(v)
		if a, ok := sortAliases[k]; ok {
			k = a
		}
		sk, ok := sortKeys[k]
		if !ok {
			return q, fmt.Errorf("sort must be one of pid, ppid, name, user, state, cpu, rss, threads, start; got %q", trim(v))
		}
		q.Sort, q.Desc = k, sk.desc
	}
	if v, ok := get("order"); ok && v != "" {
		switch strings.ToLower(v) {
		case "asc", "ascending":
			q.Desc = false
		case "desc", "descending":
			q.Desc = true
		default:
			return q, fmt.Errorf("order must be asc or desc, got %q", trim(v))
		}
	}
	if v, ok := get("filter"); ok && v != "" {
		if len(v) > maxQ {
			return q, fmt.Errorf("filter is longer than %d bytes", maxQ)
		}
		q.Filter = query.CompilePattern(v)
	}
	if v, ok := get("q"); ok && v != "" {
		if len(v) > maxQ {
			return q, fmt.Errorf("q is longer than %d bytes", maxQ)
		}
		q.Q = strings.ToLower(v)
	}
	if v, ok := get("pid"); ok && v != "" {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				return q, fmt.Errorf("pid must be a positive process id (or a comma-separated list), got %q", trim(v))
			}
			q.PIDs = append(q.PIDs, n)
			if len(q.PIDs) > maxPIDs {
				return q, fmt.Errorf("pid lists at most %d processes", maxPIDs)
			}
		}
	}
	var err error
	if q.Limit, err = intArg(get, "limit", DefaultLimit, 1, MaxLimit); err != nil {
		return q, err
	}
	if q.Offset, err = intArg(get, "offset", 0, 0, 1<<30); err != nil {
		return q, err
	}
	return q, nil
}

func intArg(get Getter, name string, def, lo, hi int) (int, error) {
	v, ok := get(name)
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s must be an integer from %d to %d, got %q", name, lo, hi, trim(v))
	}
	return n, nil
}

func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Result is one page of matching processes.
type Result struct {
	Total     int       // rows matching, before paging
	Processes []Process // the page
}

// Apply selects, sorts and pages t's rows; t is not changed.
func (q *Query) Apply(t *Table) Result {
	rows := make([]*Process, 0, len(t.Processes))
	for i := range t.Processes {
		p := &t.Processes[i]
		if q.PIDs != nil && !slices.Contains(q.PIDs, p.PID) {
			continue
		}
		if q.Filter != nil && !q.Filter.Match(p.Name, firstWord(p.Cmdline)) {
			continue
		}
		if q.Q != "" && !strings.Contains(strings.ToLower(p.Name), q.Q) &&
			!strings.Contains(strings.ToLower(p.Cmdline), q.Q) && !strings.Contains(strings.ToLower(p.User), q.Q) {
			continue
		}
		rows = append(rows, p)
	}
	by := sortKeys[q.Sort].cmp
	if by == nil {
		by = sortKeys["cpu"].cmp
	}
	slices.SortStableFunc(rows, func(a, b *Process) int {
		c := by(a, b)
		if q.Desc {
			c = -c
		}
		if c == 0 {
			c = cmp.Compare(a.PID, b.PID) // a stable page order between equal rows
		}
		return c
	})
	res := Result{Total: len(rows)}
	if q.Offset < len(rows) {
		rows = rows[q.Offset:]
		rows = rows[:min(len(rows), q.Limit)]
		res.Processes = make([]Process, len(rows))
		for i, p := range rows {
			res.Processes[i] = *p
		}
	}
	if res.Processes == nil {
		res.Processes = []Process{}
	}
	return res
}

func firstWord(s string) string {
	if i := strings.IndexByte(s, ' '); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
