package api

import "peerdns/agent/store"

// PromMetricName is the metric name allmetrics?format=prometheus gives a
// chart's dimensions (netdata_<context>_<units>_average): remote-write
// sends the same names, so a scrape and a remote write land on the same
// series.
func PromMetricName(c *store.ChartDef) string {
	b := append([]byte("netdata_"), nil...)
	b = promName(b, c.Context)
	b = promUnits(b, c.Units)
	return string(append(b, "_average"...))
}
