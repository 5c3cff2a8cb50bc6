package cli

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// metricFamily is one family of `metrics --json`.
type metricFamily struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Help    string   `json:"help"`
	Samples []sample `json:"samples"`
}

// sample is one series: Value for counters and gauges; Count, Sum and
// Buckets (upper bound → cumulative count) for histograms; Quantiles
// for summaries.
type sample struct {
	Labels    map[string]string  `json:"labels"`
	Value     *float64           `json:"value,omitempty"`
	Count     *uint64            `json:"count,omitempty"`
	Sum       *float64           `json:"sum,omitempty"`
	Buckets   map[string]uint64  `json:"buckets,omitempty"`
	Quantiles map[string]float64 `json:"quantiles,omitempty"`
}

// metrics prints /metrics: the exposition text as the node wrote it
// (only the families whose names start with one of prefixes, when
// given), or with --json the parsed families.
func (e *env) metrics(prefixes []string) error {
	b, err := e.c.getRaw("/metrics")
	if err != nil {
		return err
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return fail(ExitNoNode, "%s answered /metrics with something that is not Prometheus text: %v", e.c.addr, err)
	}
	want := func(name string) bool {
		if len(prefixes) == 0 {
			return true
		}
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
	if !e.json {
		for _, line := range strings.SplitAfter(string(b), "\n") {
			if line == "" {
				continue
			}
			if len(prefixes) > 0 && !want(lineName(line)) {
				continue
			}
			if _, err := fmt.Fprintln(e.stdout, printable(strings.TrimSuffix(line, "\n"), false)); err != nil {
				return err
			}
		}
		return nil
	}
	out := []metricFamily{}
	names := make([]string, 0, len(fams))
	for n := range fams {
		if want(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, familyJSON(fams[n]))
	}
	return e.printJSON(out)
}

// lineName is the metric name a line of the text format is about.
func lineName(line string) string {
	if strings.HasPrefix(line, "# ") {
		f := strings.Fields(line)
		if len(f) >= 3 {
			return f[2]
		}
		return ""
	}
	if i := strings.IndexAny(line, "{ "); i >= 0 {
		return line[:i]
	}
	return strings.TrimSpace(line)
}

func familyJSON(f *dto.MetricFamily) metricFamily {
	mf := metricFamily{Name: f.GetName(), Type: strings.ToLower(f.GetType().String()), Help: f.GetHelp(), Samples: []sample{}}
	for _, m := range f.GetMetric() {
		s := sample{Labels: map[string]string{}}
		for _, l := range m.GetLabel() {
			s.Labels[l.GetName()] = l.GetValue()
		}
		val := func(v float64) *float64 { return &v }
		switch {
		case m.Counter != nil:
			s.Value = val(m.Counter.GetValue())
		case m.Gauge != nil:
			s.Value = val(m.Gauge.GetValue())
		case m.Untyped != nil:
			s.Value = val(m.Untyped.GetValue())
		case m.Histogram != nil:
			c := m.Histogram.GetSampleCount()
			s.Count, s.Sum = &c, val(m.Histogram.GetSampleSum())
			s.Buckets = map[string]uint64{}
			for _, b := range m.Histogram.GetBucket() {
				s.Buckets[bound(b.GetUpperBound())] = b.GetCumulativeCount()
			}
			s.Buckets["+Inf"] = c
		case m.Summary != nil:
			c := m.Summary.GetSampleCount()
			s.Count, s.Sum = &c, val(m.Summary.GetSampleSum())
			s.Quantiles = map[string]float64{}
			for _, q := range m.Summary.GetQuantile() {
				if v := q.GetValue(); !math.IsNaN(v) && !math.IsInf(v, 0) {
					s.Quantiles[bound(q.GetQuantile())] = v
				}
			}
		}
		if s.Value != nil && (math.IsNaN(*s.Value) || math.IsInf(*s.Value, 0)) {
			s.Value = nil // JSON has no NaN or infinity
		}
		mf.Samples = append(mf.Samples, s)
	}
	return mf
}

func bound(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return fmt.Sprint(f)
}
