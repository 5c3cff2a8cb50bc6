// Package promtext reads samples from a node's GET /metrics (the
// Prometheus text format, parsed by prometheus/common's expfmt), for the
// benchmarks that measure the real binary.
package promtext

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/prometheus/common/expfmt"
)

// Values reads the samples named in want from Prometheus text: for each
// name, its first sample's value (counter, gauge or untyped; the metrics
// read this way have no labels). A name not found is absent; text that
// does not parse is an error.
func Values(text string, want ...string) (map[string]float64, error) {
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, name := range want {
		f, ok := fams[name]
		if !ok || len(f.Metric) == 0 {
			continue
		}
		switch m := f.Metric[0]; {
		case m.Counter != nil:
			out[name] = m.Counter.GetValue()
		case m.Gauge != nil:
			out[name] = m.Gauge.GetValue()
		case m.Untyped != nil:
			out[name] = m.Untyped.GetValue()
		}
	}
	return out, nil
}

// Get is Values over GET http://admin/metrics with c.
func Get(c *http.Client, admin string, want ...string) (map[string]float64, error) {
	resp, err := c.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return Values(string(b), want...)
}
