package api

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"

	"peerdns/agent/health"
	"peerdns/agent/query"
	"peerdns/agent/store"
	"peerdns/http/httpx"
)

const ctPrometheus = "text/plain; version=0.0.4"

// promOpts are the allmetrics?format=prometheus knobs Netdata has.
type promOpts struct {
	prefix     string
	help       bool
	types      bool
	timestamps bool
	useIDs     bool // names=no: dimension ids instead of names
	filter     *query.Pattern
}

func yes(ctx *fasthttp.RequestCtx, key string, def bool) bool {
	v, ok := arg(ctx, key)
	if !ok || v == "" {
		return def
	}
	switch strings.ToLower(v) {
	case "yes", "1", "true", "on":
		return true
	}
	return false
}

func parsePromOpts(ctx *fasthttp.RequestCtx) promOpts {
	o := promOpts{
		prefix:     argOr(ctx, "prefix", "netdata"),
		help:       yes(ctx, "help", false),
		types:      yes(ctx, "types", false),
		timestamps: yes(ctx, "timestamps", true),
		useIDs:     !yes(ctx, "names", true),
	}
	f, _ := arg(ctx, "filter")
	o.filter = query.CompilePattern(f)
	return o
}

// promName copies s keeping [A-Za-z0-9] and turning the rest into '_'
// (Netdata's prometheus_name_copy).
func promName(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			dst = append(dst, c)
		} else {
			dst = append(dst, '_')
		}
	}
	return dst
}

// promUnits is Netdata's prometheus_units_copy: "_" + sanitised units,
// "%" becomes "_percent" and a trailing "/s" becomes "_persec".
func promUnits(dst []byte, u string) []byte {
	if u == "%" {
		return append(dst, "_percent"...)
	}
	if u == "" {
		return dst
	}
	dst = append(dst, '_')
	if strings.HasSuffix(u, "/s") && len(u) > 2 {
		dst = promName(dst, u[:len(u)-2])
		return append(dst, "_persec"...)
	}
	return promName(dst, u)
}

// promLabel escapes a label value (backslash, quote, newline).
func promLabel(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '"':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// promChart is the precomputed text of one chart with the default options:
// the metric name and each dimension's `{labels} ` part.
type promChart struct {
	metric string
	labels []string
}

func buildPromChart(c *store.ChartDef, prefix string, useIDs bool) *promChart {
	var b []byte
	b = append(b, prefix...)
	b = append(b, '_')
	b = promName(b, c.Context)
	b = promUnits(b, c.Units)
	b = append(b, "_average"...)
	pc := &promChart{metric: string(b), labels: make([]string, len(c.Dims))}
	for i, d := range c.Dims {
		name := d.Name
		if useIDs || name == "" {
			name = d.ID
		}
		l := []byte(`{chart="`)
		l = promLabel(l, c.ID)
		l = append(l, `",family="`...)
		l = promLabel(l, c.Family)
		l = append(l, `",dimension="`...)
		l = promLabel(l, name)
		l = append(l, `"} `...)
		pc.labels[i] = string(l)
	}
	return pc
}

func (s *Server) promChartFor(c *store.ChartDef, o *promOpts) *promChart {
	if o.prefix != "netdata" || o.useIDs {
		return buildPromChart(c, o.prefix, o.useIDs)
	}
	// The cache belongs to one published chart list: when charts are
	// registered or replaced a new list (and a new cache) starts, so
	// definitions that are gone do not stay cached.
	charts := s.o.DB.Charts()
	pcache := s.prom.Load()
	if pcache == nil || !sameSlice(pcache.charts, charts) {
		pcache = &promCache{charts: charts}
		s.prom.Store(pcache)
	}
	if v, ok := pcache.m.Load(c); ok {
		return v.(*promChart)
	}
	pc := buildPromChart(c, "netdata", false)
	pcache.m.Store(c, pc)
	return pc
}

// promCache maps *store.ChartDef to its *promChart for one chart list.
type promCache struct {
	charts []*store.ChartDef
	m      sync.Map
}

// appendFixed7 is C's "%0.7f". Below 9e11 it formats the value scaled to
// an integer (strconv's fixed-precision path dominated scrape CPU).
func appendFixed7(b []byte, v float64) []byte {
	if !(math.Abs(v) < 9e11) { // also NaN and infinities
		return strconv.AppendFloat(b, v, 'f', 7, 64)
	}
	n := int64(math.Round(v * 1e7))
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	b = strconv.AppendInt(b, n/1e7, 10)
	frac := n % 1e7
	var d [8]byte
	d[0] = '.'
	for i := 7; i >= 1; i-- {
		d[i] = byte('0' + frac%10)
		frac /= 10
	}
	return append(b, d[:]...)
}

// appendPrometheus renders every chart's latest values in Netdata's
// exposition (metric per context and units, one series per dimension).
func (s *Server) appendPrometheus(b []byte, o *promOpts) []byte {
	nowMS := s.now().UnixMilli()
	if o.help {
		b = append(b, "# COMMENT peerdns agent \""...)
		b = append(b, s.host.Hostname...)
		b = append(b, "\" to prometheus, source \"average\", last value of each dimension\n\n"...)
	}
	b = append(b, o.prefix...)
	b = append(b, `_info{instance="`...)
	b = promLabel(b, s.host.Hostname)
	b = append(b, `",application="peerdns-agent",version="`...)
	b = append(b, Version...)
	b = append(b, `",_is_ephemeral="false",_has_unstable_connection="false"} 1`...)
	if o.timestamps {
		b = append(b, ' ')
		b = strconv.AppendInt(b, nowMS, 10)
	}
	b = append(b, '\n')
	typed := map[string]bool{}
	for _, c := range s.o.DB.Charts() {
		if !o.filter.Match(c.ID, c.Name) {
			continue
		}
		t, vals, ok := s.o.DB.Latest(c.ID)
		if !ok {
			continue
		}
		pc := s.promChartFor(c, o)
		if o.help {
			b = append(b, "\n# COMMENT homogeneous chart \""...)
			b = append(b, c.ID...)
			b = append(b, "\", context \""...)
			b = append(b, c.Context...)
			b = append(b, "\", family \""...)
			b = append(b, c.Family...)
			b = append(b, "\", units \""...)
			b = append(b, c.Units...)
			b = append(b, "\"\n"...)
		} else if o.types {
			b = append(b, '\n')
		}
		for i := range c.Dims {
			if i >= len(vals) || math.IsNaN(vals[i]) {
				continue
			}
			if o.help {
				b = append(b, "# COMMENT "...)
				b = append(b, pc.metric...)
				b = append(b, ": dimension \""...)
				b = append(b, c.Dims[i].Name...)
				b = append(b, "\", value is "...)
				b = append(b, c.Units...)
				b = append(b, ", gauge, dt "...)
				b = strconv.AppendInt(b, t, 10)
				b = append(b, " to "...)
				b = strconv.AppendInt(b, t, 10)
				b = append(b, " inclusive\n"...)
			}
			if o.types && !typed[pc.metric] {
				// One TYPE per metric family. Netdata repeats it for every
				// dimension with help=yes, which Prometheus' text parser
				// rejects ("second TYPE line"), so we print it once.
				typed[pc.metric] = true
				b = append(b, "# TYPE "...)
				b = append(b, pc.metric...)
				b = append(b, " gauge\n"...)
			}
			b = append(b, pc.metric...)
			b = append(b, pc.labels[i]...)
			b = appendFixed7(b, vals[i])
			if o.timestamps {
				b = append(b, ' ')
				b = strconv.AppendInt(b, t*1000, 10)
			}
			b = append(b, '\n')
		}
	}
	return b
}

// shellName is NETDATA_<CHART>_<DIM>: upper case, [A-Z0-9] kept, rest '_'.
func shellName(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			b = append(b, c-'a'+'A')
		case c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
			b = append(b, c)
		default:
			b = append(b, '_')
		}
	}
	return b
}

func appendRounded(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return b
	}
	if v == 0 {
		return append(b, '0')
	}
	b = strconv.AppendFloat(b, v, 'f', 0, 64)
	if len(b) >= 2 && b[len(b)-2] == '-' && b[len(b)-1] == '0' {
		b = append(b[:len(b)-2], '0')
	}
	return b
}

func (s *Server) appendShell(b []byte, filter *query.Pattern, alerts []health.Alert) []byte {
	for _, c := range s.o.DB.Charts() {
		if !filter.Match(c.ID, c.Name) {
			continue
		}
		_, vals, ok := s.o.DB.Latest(c.ID)
		if !ok {
			continue
		}
		b = append(b, "\n# chart: "...)
		b = append(b, c.ID...)
		b = append(b, " (name: "...)
		b = append(b, c.Name...)
		b = append(b, ")\n"...)
		total := 0.0
		for i, d := range c.Dims {
			v := math.NaN()
			if i < len(vals) {
				v = vals[i]
			}
			if !d.Hidden && !math.IsNaN(v) {
				total += v
			}
			b = append(b, "NETDATA_"...)
			b = shellName(b, c.ID)
			b = append(b, '_')
			b = shellName(b, d.Name)
			b = append(b, "=\""...)
			b = appendRounded(b, v)
			b = append(b, "\"      # "...)
			b = append(b, c.Units...)
			b = append(b, '\n')
		}
		b = append(b, "NETDATA_"...)
		b = shellName(b, c.ID)
		b = append(b, "_VISIBLETOTAL=\""...)
		b = appendRounded(b, total)
		b = append(b, "\"      # "...)
		b = append(b, c.Units...)
		b = append(b, '\n')
	}
	b = append(b, "\n# NETDATA ALARMS RUNNING\n"...)
	for _, a := range alerts {
		if !filter.Match(a.Chart, a.Chart) {
			continue
		}
		b = append(b, "NETDATA_ALARM_"...)
		b = shellName(b, a.Chart)
		b = append(b, '_')
		b = shellName(b, a.Name)
		b = append(b, "_VALUE=\""...)
		b = appendRounded(b, a.Value)
		b = append(b, "\"      # "...)
		b = append(b, a.Units...)
		b = append(b, "\nNETDATA_ALARM_"...)
		b = shellName(b, a.Chart)
		b = append(b, '_')
		b = shellName(b, a.Name)
		b = append(b, "_STATUS=\""...)
		b = append(b, a.Status...)
		b = append(b, "\"\n"...)
	}
	return b
}

// appendAllJSON renders Netdata's allmetrics?format=json object.
func (s *Server) appendAllJSON(b []byte, filter *query.Pattern) []byte {
	b = append(b, '{')
	n := 0
	for _, c := range s.o.DB.Charts() {
		if !filter.Match(c.ID, c.Name) {
			continue
		}
		t, vals, ok := s.o.DB.Latest(c.ID)
		if !ok {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, "\n\t"...)
		b = query.AppendJSONString(b, c.ID)
		b = append(b, ": {\n\t\t\"name\":"...)
		b = query.AppendJSONString(b, c.Name)
		b = append(b, ",\n\t\t\"family\":"...)
		b = query.AppendJSONString(b, c.Family)
		b = append(b, ",\n\t\t\"context\":"...)
		b = query.AppendJSONString(b, c.Context)
		b = append(b, ",\n\t\t\"units\":"...)
		b = query.AppendJSONString(b, c.Units)
		b = append(b, ",\n\t\t\"last_updated\": "...)
		b = strconv.AppendInt(b, t, 10)
		b = append(b, ",\n\t\t\"dimensions\": {"...)
		for i, d := range c.Dims {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, "\n\t\t\t"...)
			b = query.AppendJSONString(b, d.ID)
			b = append(b, ": {\n\t\t\t\t\"name\": "...)
			b = query.AppendJSONString(b, d.Name)
			b = append(b, ",\n\t\t\t\t\"value\": "...)
			if i < len(vals) && !math.IsNaN(vals[i]) && !math.IsInf(vals[i], 0) {
				b = appendFixed7(b, vals[i])
			} else {
				b = append(b, "null"...)
			}
			b = append(b, "\n\t\t\t}"...)
		}
		b = append(b, "\n\t\t}\n\t}"...)
	}
	return append(b, "\n}"...)
}

const msgBadFormat = "Which format? 'shell', 'prometheus', 'prometheus_all_hosts' and 'json' are currently supported."

func (s *Server) allmetrics(ctx *fasthttp.RequestCtx, _ int) error {
	format := argOr(ctx, "format", "shell")
	if src, ok := arg(ctx, "source"); ok && src != "" && src != "average" {
		return httpx.BadRequest("source %q is not supported: the agent keeps converted values, so only source=average exists", src)
	}
	buf := getBuf()
	defer putBuf(buf)
	switch format {
	case "prometheus", "prometheus_all_hosts":
		s.counters.prom.Add(1)
		o := parsePromOpts(ctx)
		// Size the buffer like the last scrape: growing it by doubling
		// was a fifth of a scrape's CPU (memmove).
		*buf = slices.Grow(*buf, int(s.lastPromSize.Load())+1024)
		*buf = s.appendPrometheus(*buf, &o)
		s.lastPromSize.Store(int64(len(*buf)))
		setBody(ctx, ctPrometheus, *buf)
	case "shell":
		s.counters.shell.Add(1)
		f, _ := arg(ctx, "filter")
		*buf = s.appendShell(*buf, query.CompilePattern(f), s.alerts())
		setBody(ctx, "text/plain; charset=utf-8", *buf)
	case "json":
		s.counters.json.Add(1)
		f, _ := arg(ctx, "filter")
		*buf = s.appendAllJSON(*buf, query.CompilePattern(f))
		setBody(ctx, ctJSON, *buf)
	default:
		return httpx.BadRequest(msgBadFormat)
	}
	return nil
}

// export is a snapshot of every chart's latest values and the alerts, as
// JSON (default) or Prometheus text; write=1 stores it in the export
// directory under a name the agent chooses and answers where.
func (s *Server) export(ctx *fasthttp.RequestCtx, _ int) error {
	format := argOr(ctx, "format", "json")
	var body []byte
	var ext, ct string
	switch format {
	case "json":
		b := []byte("{\n\t\"hostname\": ")
		b = query.AppendJSONString(b, s.host.Hostname)
		b = append(b, ",\n\t\"machine_guid\": "...)
		b = query.AppendJSONString(b, s.host.GUID)
		b = append(b, ",\n\t\"public_key\": "...)
		b = query.AppendJSONString(b, s.host.PublicKey)
		b = append(b, ",\n\t\"version\": "...)
		b = query.AppendJSONString(b, Version)
		b = append(b, ",\n\t\"exported_at\": "...)
		b = strconv.AppendInt(b, s.now().Unix(), 10)
		b = append(b, ",\n\t\"charts\": "...)
		b = s.appendAllJSON(b, nil)
		al, err := json.Marshal(alertList(s.alerts()))
		if err != nil {
			return httpx.Internal("encode alerts: %v", err)
		}
		b = append(b, ",\n\t\"alerts\": "...)
		b = append(b, al...)
		st, err := json.Marshal(s.stats())
		if err != nil {
			return httpx.Internal("encode stats: %v", err)
		}
		b = append(b, ",\n\t\"storage\": "...)
		b = append(b, st...)
		body = append(b, "\n}\n"...)
		ext, ct = "json", ctJSON
	case "prometheus":
		o := promOpts{prefix: "netdata", timestamps: true, types: yes(ctx, "types", true), help: yes(ctx, "help", false)}
		body = s.appendPrometheus(nil, &o)
		ext, ct = "prom", ctPrometheus
	default:
		return httpx.BadRequest("unknown export format %q: use json or prometheus", format)
	}
	if !yes(ctx, "write", false) {
		setBody(ctx, ct, body)
		return nil
	}
	if s.o.ExportDir == "" {
		return httpx.Errorf(fasthttp.StatusServiceUnavailable, "no export directory is configured (AGENT_EXPORT_DIR)")
	}
	if err := os.MkdirAll(s.o.ExportDir, 0o700); err != nil {
		return httpx.Internal("create export directory: %v", err)
	}
	name := fmt.Sprintf("peerdns-agent-%s-%d.%s", s.now().UTC().Format("20060102T150405Z"), s.exportN.Add(1), ext)
	path := filepath.Join(s.o.ExportDir, name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, body, 0o600); err != nil {
		return httpx.Internal("write export: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return httpx.Internal("write export: %v", err)
	}
	return writeJSON(ctx, map[string]any{
		"written": path, "file": name, "bytes": len(body), "format": format, "time": s.now().Unix(),
	})
}

// alertList is the JSON form of alerts for export.
func alertList(as []health.Alert) []map[string]any {
	out := make([]map[string]any, 0, len(as))
	for _, a := range as {
		out = append(out, map[string]any{
			"id": a.ID, "name": a.Name, "chart": a.Chart, "context": a.Context, "status": a.Status,
			"value": jsonNum(a.Value), "units": a.Units, "last_status_change": a.LastStatusChange,
		})
	}
	return out
}
