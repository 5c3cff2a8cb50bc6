package api

import (
	"math"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/store"
	"peerdns/agent/weights"
	"peerdns/http/httpx"
)

// weights answers /api/vN/weights: which dimensions changed most in a
// highlight window (agent/weights does the scoring). Every version gets
// the spec's {method, view, results}; v1 also carries Netdata 1.37's own
// members (after, before, baseline_*, statistics, group, options, the
// contexts nesting, weighted_dimensions, total_dimensions_count) so
// Netdata's dashboard code reads it; the decisions are in agent/weights/doc.go.
func (s *Server) weights(ctx *fasthttp.RequestCtx, ver int) error {
	now := s.now()
	req, err := weights.ParseRequest(weights.Getter(getter(ctx)), now.Unix())
	if err != nil {
		return httpx.BadRequest("%v", err)
	}
	req.Tier = weightsTier(&req, s.stats())
	ans := weights.Compute(weightsSource{s.o.DB}, s.o.Health, req, time.Now)
	return writeJSON(ctx, weightsBody(ans, ver))
}

// weightsTier is the tier a weights query reads: tier 1 when what it
// reads is longer than tier 0 keeps, or starts before tier 0's oldest
// point while tier 1 holds minutes before it (a past window; not a
// young agent, whose tier 1 starts at most a minute earlier); otherwise
// tier 0, whose seconds give the most points.
func weightsTier(req *weights.Request, st store.Stats) int {
	if !req.Window {
		return 0
	}
	lo, hi := req.ReadWindow()
	if time.Duration(hi-lo)*time.Second > st.Tier0Retention {
		return 1
	}
	if lo+1 < st.FirstTime && st.Tier1First > 0 && st.Tier1First+60 <= st.FirstTime {
		return 1
	}
	return 0
}

type weightsWindow struct {
	After    int64 `json:"after"`
	Before   int64 `json:"before"`
	Duration int64 `json:"duration"`
	Points   int   `json:"points"`
}

type weightsView struct {
	Highlight *weightsWindow `json:"highlight"`
	Baseline  *weightsWindow `json:"baseline"`
}

type weightsResult struct {
	ID      string         `json:"id"`
	Weight  nullFloat      `json:"weight"`
	Context string         `json:"context"`
	Family  string         `json:"family"`
	Info    map[string]any `json:"info"`
}

type weightsStats struct {
	QueryTimeMS       float64 `json:"query_time_ms"`
	DBQueries         int     `json:"db_queries"`
	QueryResultPoints int     `json:"query_result_points"`
	BinarySearches    int     `json:"binary_searches"`
	DBPointsRead      int     `json:"db_points_read"`
	DBPointsPerTier   []int   `json:"db_points_per_tier"`
}

// weightsAnswer is the body: Netdata's v1 members (omitted in v2/v3)
// first, then the spec's.
type weightsAnswer struct {
	After            *int64                      `json:"after,omitempty"`
	Before           *int64                      `json:"before,omitempty"`
	Duration         *int64                      `json:"duration,omitempty"`
	Points           *int                        `json:"points,omitempty"`
	BaselineAfter    *int64                      `json:"baseline_after,omitempty"`
	BaselineBefore   *int64                      `json:"baseline_before,omitempty"`
	BaselineDuration *int64                      `json:"baseline_duration,omitempty"`
	BaselinePoints   *int                        `json:"baseline_points,omitempty"`
	Statistics       weightsStats                `json:"statistics"`
	Group            string                      `json:"group,omitempty"`
	Method           weights.Method              `json:"method"`
	Options          string                      `json:"options,omitempty"`
	Contexts         map[string]*weightsCtxEntry `json:"contexts,omitempty"`
	Correlated       map[string]*correlatedChart `json:"correlated_charts,omitempty"`
	CorrelatedDims   *int                        `json:"correlated_dimensions,omitempty"`
	Weighted         *int                        `json:"weighted_dimensions,omitempty"`
	TotalDims        *int                        `json:"total_dimensions_count,omitempty"`
	View             weightsView                 `json:"view"`
	Results          []weightsResult             `json:"results"`
	Total            int                         `json:"total"`
	Examined         int                         `json:"examined"`
	Partial          bool                        `json:"partial"`
	TimeoutMS        *int64                      `json:"timeout_ms,omitempty"`
	Message          string                      `json:"message,omitempty"`
}

type weightsCtxEntry struct {
	Charts map[string]*weightsChartEntry `json:"charts"`
	Weight nullFloat                     `json:"weight"`
	sum    float64
	n      int
}

type weightsChartEntry struct {
	Dimensions map[string]nullFloat `json:"dimensions"`
	Weight     nullFloat            `json:"weight"`
	sum        float64
	n          int
}

// compares reports whether the method compares the highlight with a
// baseline.
func compares(m weights.Method) bool { return m == weights.KS2 || m == weights.Volume }

func weightsBody(ans *weights.Answer, ver int) *weightsAnswer {
	req := ans.Request
	st := ans.Stats
	out := &weightsAnswer{
		Method: req.Method,
		Statistics: weightsStats{
			QueryTimeMS:       float64(st.Duration.Microseconds()) / 1000,
			DBQueries:         st.DBQueries,
			QueryResultPoints: st.ResultPoints,
			DBPointsRead:      st.DBPoints[0] + st.DBPoints[1],
			DBPointsPerTier:   st.DBPoints[:],
		},
		Results:  make([]weightsResult, 0, len(ans.Results)),
		Total:    ans.Total,
		Examined: st.Examined,
		Partial:  ans.Partial,
	}
	hiPoints, basePoints := st.HighlightPts, st.BaselinePts
	if !compares(req.Method) {
		hiPoints = max(hiPoints, (int(req.Before-req.After)+max(st.GroupSlots, 1)-1)/max(st.GroupSlots, 1))
	}
	if req.Window {
		out.View.Highlight = &weightsWindow{req.After, req.Before, req.Before - req.After, hiPoints}
		if compares(req.Method) {
			out.View.Baseline = &weightsWindow{req.BaselineAfter, req.BaselineBefore, req.BaselineBefore - req.BaselineAfter, basePoints}
		}
	}
	if ans.Partial {
		ms := req.Timeout.Milliseconds()
		out.TimeoutMS = &ms
		out.Message = "the time budget ran out: the results cover the charts examined before it"
	}
	for _, r := range ans.Results {
		out.Results = append(out.Results, weightsResult{ID: r.ID, Weight: nullFloat(r.Weight),
			Context: r.Context, Family: r.Family, Info: finiteInfo(r)})
	}
	if ver != 1 {
		return out
	}
	// Netdata 1.37's members.
	w := out.View.Highlight
	if w == nil {
		w = &weightsWindow{}
	}
	out.After, out.Before, out.Duration, out.Points = &w.After, &w.Before, &w.Duration, &w.Points
	if b := out.View.Baseline; b != nil {
		out.BaselineAfter, out.BaselineBefore, out.BaselineDuration, out.BaselinePoints = &b.After, &b.Before, &b.Duration, &b.Points
	}
	out.Group = "average"
	out.Options = "unaligned"
	scores := weights.NetdataScores(req.Method, ans.Results)
	out.Contexts = map[string]*weightsCtxEntry{}
	for i, r := range ans.Results {
		c := out.Contexts[r.Context]
		if c == nil {
			c = &weightsCtxEntry{Charts: map[string]*weightsChartEntry{}}
			out.Contexts[r.Context] = c
		}
		ch := c.Charts[r.Chart]
		if ch == nil {
			ch = &weightsChartEntry{Dimensions: map[string]nullFloat{}}
			c.Charts[r.Chart] = ch
		}
		if r.Dimension != "" {
			ch.Dimensions[r.Name] = nullFloat(scores[i])
		}
		ch.sum += scores[i]
		ch.n++
		c.sum += scores[i]
		c.n++
		ch.Weight = nullFloat(ch.sum / float64(ch.n))
		c.Weight = nullFloat(c.sum / float64(c.n))
	}
	n, total := len(ans.Results), st.Examined
	out.Weighted, out.TotalDims = &n, &total
	return out
}

// finiteInfo copies a result's info with non-finite numbers as null
// (encoding/json refuses NaN).
func finiteInfo(r weights.Result) map[string]any {
	info := make(map[string]any, len(r.Info)+3)
	for k, v := range r.Info {
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			v = nil
		}
		info[k] = v
	}
	info["chart"] = r.Chart
	if r.Dimension != "" {
		info["dimension"] = r.Dimension
		info["dimension_name"] = r.Name
	}
	return info
}

// weightsSource is the store as weights reads it, its reads counted as
// weights' (netdata.queries).
type weightsSource struct{ *store.DB }

func (w weightsSource) Query(chartID string, tier int, after, before int64) (*store.Window, error) {
	return w.QueryFor(store.ReadWeights, chartID, tier, after, before)
}
