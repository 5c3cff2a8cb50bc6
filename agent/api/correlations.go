package api

import (
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/weights"
	"peerdns/http/httpx"
)

// metricCorrelations answers /api/vN/metric_correlations, weights' older
// name, as Netdata serves it (api_v1_metric_correlations): the same
// scoring with ks2 as the default method and Netdata's "charts" layout,
// correlated_charts (each chart's context and its dimensions' weights),
// correlated_dimensions and total_dimensions_count, beside the v1 weights
// header (after, before, baseline_*, statistics, group, method, options).
// Netdata picks a window when none is given; here ks2 without after is a
// 400 that says to give one, as weights answers it.
func (s *Server) metricCorrelations(ctx *fasthttp.RequestCtx, _ int) error {
	now := s.now()
	get := getter(ctx)
	req, err := weights.ParseRequest(func(k string) (string, bool) {
		v, ok := get(k)
		if k == "method" && strings.TrimSpace(v) == "" {
			return string(weights.KS2), true
		}
		return v, ok
	}, now.Unix())
	if err != nil {
		return httpx.BadRequest("%v", err)
	}
	req.Tier = weightsTier(&req, s.stats())
	ans := weights.Compute(weightsSource{s.o.DB}, s.o.Health, req, time.Now)
	out := weightsBody(ans, 1)
	// The charts layout replaces the contexts nesting.
	out.Contexts, out.Weighted = nil, nil
	out.Correlated = map[string]*correlatedChart{}
	scores := weights.NetdataScores(req.Method, ans.Results)
	n := 0
	for i, r := range ans.Results {
		if r.Dimension == "" {
			continue
		}
		c := out.Correlated[r.Chart]
		if c == nil {
			c = &correlatedChart{Context: r.Context, Dimensions: map[string]nullFloat{}}
			out.Correlated[r.Chart] = c
		}
		c.Dimensions[r.Name] = nullFloat(scores[i])
		n++
	}
	out.CorrelatedDims = &n
	return writeJSON(ctx, out)
}

// correlatedChart is one chart of metric_correlations' correlated_charts.
type correlatedChart struct {
	Context    string               `json:"context"`
	Dimensions map[string]nullFloat `json:"dimensions"`
}
