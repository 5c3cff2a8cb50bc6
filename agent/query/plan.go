package query

import "fmt"

// Plan is a resolved, aligned query window: Points output points of Group
// slots each, Step seconds per slot. After is the time of the first slot of
// the oldest point and Before the time of the last slot of the newest point
// (both inclusive), as Netdata reports them in jsonwrap.
type Plan struct {
	After, Before int64
	Step          int64
	Group         int
	Points        int
}

// ViewUpdateEvery is the seconds one output point covers.
func (p Plan) ViewUpdateEvery() int64 { return int64(p.Group) * p.Step }

// RowTime is the timestamp of output row r, counting from the oldest (0):
// the time of the last slot of that point, as Netdata labels rows.
func (p Plan) RowTime(r int) int64 {
	return p.After + (int64(r)*int64(p.Group)+int64(p.Group)-1)*p.Step
}

// NewPlan resolves after/before against now and the newest stored point
// (last, unix seconds; 0 means the chart holds no data), then picks the
// group size for the requested points and aligns the window like Netdata:
// the newest point ends on a multiple of the group duration (unless
// unaligned). An after later than before is an error; a chart with no
// stored data gives Points == 0.
//
// The sixth argument (the oldest stored point) no longer changes the
// plan: a window that starts before the data is not moved forward, its
// early rows are null, as Netdata 1.37 pads them back to after
// (api_v1_data_system.load_defaults.json). It stays in the signature for
// callers written against the older plan.
func NewPlan(after, before int64, points int, unaligned bool, now, _, last, step int64) (Plan, error) {
	if step <= 0 {
		step = 1
	}
	if points <= 0 {
		return Plan{}, fmt.Errorf("points must be a positive integer, got %d", points)
	}
	a, b := ResolveWindow(after, before, now, last)
	if a > b {
		return Plan{}, fmt.Errorf("after (%d) is later than before (%d)", a, b)
	}
	if b > now {
		b = now
	}
	if last > 0 && b > last {
		b = last
	}
	p := Plan{Step: step}
	b = floorDiv(b, step) * step
	a = floorDiv(a+step-1, step) * step
	if a > b || last == 0 {
		p.After, p.Before = b, b
		return p, nil
	}
	n := (b - a) / step
	if n < 1 {
		n = 1
	}
	if int64(points) > n {
		points = int(n)
	}
	group := (n + int64(points) - 1) / int64(points)
	points = int((n + group - 1) / group)
	if !unaligned && group > 1 {
		b = floorDiv(b, group*step) * group * step
	}
	p.Group = int(group)
	p.Points = points
	p.Before = b
	p.After = b - (int64(points)*group-1)*step
	return p, nil
}

// ResolveWindow is the absolute window NewPlan reads after and before as
// (last as in NewPlan). Values up to RelativeMax are relative: before
// counts from now and stops at now; after counts back from before
// (clamped to now and to the newest point), whatever its sign, so
// after=-10 and after=10 are both the 10 newest points. Larger values are
// unix seconds, kept as given.
func ResolveWindow(after, before, now, last int64) (a, b int64) {
	b = before
	if abs64(b) <= RelativeMax {
		b = min(now+b, now)
	}
	a = after
	if abs64(a) <= RelativeMax {
		anchor := min(b, now)
		if last > 0 {
			anchor = min(anchor, last)
		}
		a = anchor - abs64(a)
	}
	return a, b
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
