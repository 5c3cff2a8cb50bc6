package api

import (
	"bytes"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// knownCollected is a collector's newest raw values, fixed for the test
// (the agent passes *collect.Manager, tested in agent/collect).
type knownCollected struct {
	at  time.Time
	raw map[string][]float64
}

func (k *knownCollected) Collected(id string) (time.Time, []float64, bool) {
	v, ok := k.raw[id]
	return k.at, v, ok
}

func parseProm(t *testing.T, what string, b []byte) map[string]*dto.MetricFamily {
	t.Helper()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s does not parse: %v\n%.600s", what, err, b)
	}
	return fams
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestPrometheusAsCollected: source=as-collected shows the collector's raw
// values under Netdata's names (counters end in _total, charts with
// mixed dimensions give one metric per dimension), stamped with the read
// time; charts never collected are left out.
func TestPrometheusAsCollected(t *testing.T) {
	at := time.Unix(1795313781, 399e6)
	jiffies := []float64{0, 0, 346, 278, 0, 23803, 7223, 109, 413, 95249}
	kc := &knownCollected{at: at, raw: map[string][]float64{
		"system.cpu":  jiffies,
		"system.load": {350, 870, 480},
		"disk.vda":    {3177698, 1200},
		"system.ram":  {23354100, 179476, 1134316, 15764},
	}}
	env := newTestEnv(t, func(o *Options) { o.Collected = kc })
	cpu := testCharts()[0]
	for i := range cpu.Dims {
		cpu.Dims[i].Algorithm = "incremental"
	}
	ram := testCharts()[6]
	ram.Dims[3].Divisor = 1024 // one dimension scaled differently: heterogeneous
	if err := env.db.Register(cpu); err != nil {
		t.Fatal(err)
	}
	if err := env.db.Register(ram); err != nil {
		t.Fatal(err)
	}
	r := env.get(t, "/api/v1/allmetrics?format=prometheus&source=as-collected&types=yes&help=yes")
	if r.status != 200 || r.header.Get("Content-Type") != ctPrometheus {
		t.Fatalf("%d %s: %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	fams := parseProm(t, "as-collected", r.body)
	ref := parseProm(t, "reference", readRef(t, "api_v1_allmetrics_prometheus_source-as-collected.txt"))
	for _, tt := range []struct {
		name  string
		typ   dto.MetricType
		chart string
		want  []float64
	}{
		{"netdata_system_cpu_total", dto.MetricType_COUNTER, "system.cpu", jiffies},
		{"netdata_system_load", dto.MetricType_GAUGE, "system.load", []float64{350, 870, 480}},
		{"netdata_disk_io", dto.MetricType_GAUGE, "disk.vda", []float64{3177698, 1200}},
	} {
		f := fams[tt.name]
		if f == nil {
			t.Errorf("no %s; have %v", tt.name, keys(fams))
			continue
		}
		if f.GetType() != tt.typ {
			t.Errorf("%s is %v, want %v", tt.name, f.GetType(), tt.typ)
		}
		if len(f.Metric) != len(tt.want) {
			t.Errorf("%s has %d series, want %d", tt.name, len(f.Metric), len(tt.want))
			continue
		}
		for i, m := range f.Metric {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			if l := labelsOf(m); l["chart"] != tt.chart || l["dimension"] == "" || v != tt.want[i] {
				t.Errorf("%s series %d = %v %v, want chart %s value %v", tt.name, i, l, v, tt.chart, tt.want[i])
			}
			if m.GetTimestampMs() != at.UnixMilli() {
				t.Errorf("%s timestamp %d, want the read time %d", tt.name, m.GetTimestampMs(), at.UnixMilli())
			}
		}
	}
	// Netdata names the same charts the same way (its disk.io is a counter
	// because it collects sectors; the test's chart is absolute).
	for _, n := range []string{"netdata_system_cpu_total", "netdata_system_load", "netdata_disk_io_total", "netdata_system_ram"} {
		if ref[n] == nil {
			t.Errorf("reference has no %s: naming assumption wrong", n)
		}
	}
	// Heterogeneous: one metric per dimension, no dimension label.
	if f := fams["netdata_system_ram_buffers"]; f == nil || len(f.Metric) != 1 || labelsOf(f.Metric[0])["dimension"] != "" {
		t.Errorf("heterogeneous system.ram: %v", f)
	}
	if bytes.Contains(r.body, []byte(`chart="cpu.cpu0"`)) {
		t.Error("a chart without collected values is shown")
	}
	// all hosts: the instance label on every series, in both sources.
	for _, path := range []string{"/api/v1/allmetrics?format=prometheus_all_hosts", "/api/v1/allmetrics?format=prometheus_all_hosts&source=as-collected"} {
		r := env.get(t, path)
		fams := parseProm(t, path, r.body)
		n := 0
		for name, f := range fams {
			for _, m := range f.Metric {
				n++
				if l := labelsOf(m); l["instance"] != env.srv.host.Hostname {
					t.Errorf("%s: %s%v has no instance=%q", path, name, l, env.srv.host.Hostname)
				}
			}
		}
		if n < 4 {
			t.Errorf("%s: only %d series", path, n)
		}
	}
	ref = parseProm(t, "reference", readRef(t, "api_v1_allmetrics_prometheus_all_hosts.txt"))
	if m := ref["netdata_system_cpu_percentage_average"]; m == nil || labelsOf(m.Metric[0])["instance"] != "vm" {
		t.Error("reference all_hosts has no instance label: assumption wrong")
	}
	// Plain prometheus has no instance label on the series.
	if r := env.get(t, "/api/v1/allmetrics?format=prometheus&filter=system.load"); strings.Contains(string(r.body), `dimension="load1",instance=`) {
		t.Errorf("instance label without all_hosts:\n%s", r.body)
	}
}

func TestAllmetricsSourceErrors(t *testing.T) {
	without := newTestEnv(t)
	with := newTestEnv(t, func(o *Options) { o.Collected = &knownCollected{} })
	for _, tt := range []struct {
		env  *testEnv
		path string
		want string
	}{
		{without, "/api/v1/allmetrics?format=prometheus&source=as-collected", "no collector"},
		{with, "/api/v1/allmetrics?format=prometheus&source=bogus", "not supported"},
		{with, "/api/v1/allmetrics?format=json&source=as-collected", "format=prometheus"},
		{with, "/api/v1/allmetrics?format=prometheus&source=" + strings.Repeat("x", 10<<10), "not supported"},
	} {
		r := tt.env.get(t, tt.path)
		if r.status != 400 || !strings.Contains(string(r.body), tt.want) || len(r.body) > 300 {
			t.Errorf("%.80s = %d %q, want 400 with %q", tt.path, r.status, r.body, tt.want)
		}
	}
}

// TestPrometheusPrefix: prefix= starts every metric name, so it must be
// one (Prometheus' [a-zA-Z_:][a-zA-Z0-9_:]*, at most 256 bytes): a line
// break or a brace in it wrote series of the client's making into the
// scrape, and a 10 KB prefix made a 1,300-series scrape 13 MB.
func TestPrometheusPrefix(t *testing.T) {
	env := newTestEnv(t)
	for _, p := range []string{"x%0Aevil_metric%201%0A", "a%20b", "a%7B", "9lives", "na%C3%AFve", strings.Repeat("p", 257)} {
		for _, f := range []string{"prometheus", "prometheus_all_hosts"} {
			r := env.get(t, "/api/v1/allmetrics?format="+f+"&prefix="+p)
			if r.status != 400 || !strings.Contains(string(r.body), "prefix") || strings.Contains(string(r.body), "\nevil_metric") {
				t.Errorf("prefix=%.40s format=%s: %d %.200q, want 400 naming prefix", p, f, r.status, r.body)
			}
		}
	}
	for _, p := range []string{"netdata", "my_agent:host", "_x", ""} {
		r := env.get(t, "/api/v1/allmetrics?format=prometheus&filter=system.load&prefix="+p)
		want := p
		if p == "" {
			want = "netdata" // an empty prefix is the default, as an absent one
		}
		if r.status != 200 || !strings.Contains(string(r.body), "\n"+want+"_system_load_load_average{") {
			t.Errorf("prefix=%q: %d\n%s", p, r.status, r.body)
		}
	}
}

// TestShellFilterKeepsAlarms: the shell format's filter picks charts;
// the alarms section lists every alarm whatever the filter, as
// Netdata's does (api_v1_allmetrics_shell_filter-system.cpu.txt lists
// system.ram's and mem's alarms), so a script that reads one chart's
// values still sees every alarm's status.
func TestShellFilterKeepsAlarms(t *testing.T) {
	env := newTestEnv(t)
	ref := string(readRef(t, "api_v1_allmetrics_shell_filter-system.cpu.txt"))
	if !strings.Contains(ref, "NETDATA_ALARM_SYSTEM_RAM_RAM_IN_USE_STATUS=") {
		t.Fatal("reference lists no system.ram alarm: assumption wrong")
	}
	r := env.get(t, "/api/v1/allmetrics?format=shell&filter=system.load")
	body := string(r.body)
	if strings.Contains(body, "NETDATA_SYSTEM_CPU_USER=") || !strings.Contains(body, "NETDATA_SYSTEM_LOAD_LOAD1=") {
		t.Fatalf("filter not applied to charts:\n%s", body)
	}
	for _, want := range []string{
		`NETDATA_ALARM_SYSTEM_RAM_RAM_IN_USE_STATUS="CLEAR"`,
		`NETDATA_ALARM_SYSTEM_CPU_10MIN_CPU_USAGE_STATUS="WARNING"`,
		`NETDATA_ALARM_SYSTEM_LOAD_LOAD_AVERAGE_15_STATUS="UNDEFINED"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("filtered shell output lacks %s:\n%s", want, body)
		}
	}
}
