package api

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

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
	// instance adds instance="<hostname>" to every series, as Netdata's
	// format=prometheus_all_hosts does (one scrape, many hosts).
	instance bool
	// collected is source=as-collected: the values as the collectors
	// read them (counters as counters), not the per-second averages.
	collected bool
}

// parsePromOpts reads the knobs. prefix starts every metric name, so it
// must be one: Prometheus' [a-zA-Z_:][a-zA-Z0-9_:]*, at most
// maxPromPrefix bytes (Netdata writes it as given, and a line break in
// it adds series of the client's making to the scrape).
func parsePromOpts(ctx *fasthttp.RequestCtx) (promOpts, error) {
	o := promOpts{
		prefix:     argOr(ctx, "prefix", "netdata"),
		help:       yes(ctx, "help", false),
		types:      yes(ctx, "types", false),
		timestamps: yes(ctx, "timestamps", true),
		useIDs:     !yes(ctx, "names", true),
	}
	if !validPromPrefix(o.prefix) {
		return o, httpx.BadRequest("prefix must be a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*, at most %d bytes), got %q", maxPromPrefix, trimArg(o.prefix))
	}
	f, _ := arg(ctx, "filter")
	o.filter = query.CompilePattern(f)
	return o, nil
}

// maxPromPrefix bounds prefix= (Netdata's PROMETHEUS_ELEMENT_MAX): it is
// repeated in every series of the scrape.
const maxPromPrefix = 256

func validPromPrefix(p string) bool {
	if len(p) > maxPromPrefix {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == ':' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
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

// promLabel escapes a label value (backslash, quote, newline) and writes
// each byte that is not UTF-8 as U+FFFD: Prometheus refuses a whole
// scrape for one label value that is not UTF-8, and a mount point (a
// disk_space family) or an interface name is whatever bytes its maker
// chose.
func promLabel(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' || c == '"':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c < utf8.RuneSelf:
			dst = append(dst, c)
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[i:i+n]...)
			}
			i += n - 1
		}
	}
	return dst
}

// promChart is the precomputed text of one chart with the default options:
// the metric name and each dimension's `{labels` part (without the closing
// brace, so an instance label can follow).
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
		l = append(l, '"')
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
// Written by hand because it is the scrape hot path: BenchmarkPrometheus
// and BenchmarkPrometheus1300 measure it.
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
	b = append(b, s.agentVersion()...)
	b = append(b, `",_is_ephemeral="false",_has_unstable_connection="false"} 1`...)
	if o.timestamps {
		b = append(b, ' ')
		b = strconv.AppendInt(b, nowMS, 10)
	}
	b = append(b, '\n')
	if o.collected {
		return s.appendPromCollected(b, o)
	}
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
			b = appendChartComment(b, c, "homogeneous", "")
		} else if o.types {
			b = append(b, '\n')
		}
		for i := range c.Dims {
			if i >= len(vals) || !finite(vals[i]) {
				continue
			}
			if o.help {
				b = append(b, "# COMMENT "...)
				b = append(b, pc.metric...)
				b = append(b, ": dimension \""...)
				b = appendCommentText(b, c.Dims[i].Name)
				b = append(b, "\", value is "...)
				b = appendCommentText(b, c.Units)
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
			b = s.closeLabels(b, o)
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

// closeLabels ends a series' label set (with the instance label for
// prometheus_all_hosts) and the space before the value.
func (s *Server) closeLabels(b []byte, o *promOpts) []byte {
	if o.instance {
		b = append(b, `,instance="`...)
		b = promLabel(b, s.host.Hostname)
		b = append(b, '"')
	}
	return append(b, "} "...)
}

// appendCommentText writes s into a comment line: a line break (a
// child's chart text, a mount point's path) becomes a space, so the
// text cannot end the comment and start a series (Prometheus) or a
// command (the shell format, which scripts run).
func appendCommentText(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\n' || c == '\r' {
			b = append(b, ' ')
		} else {
			b = append(b, c)
		}
	}
	return b
}

// appendChartComment writes Netdata's "# COMMENT <kind> chart ..." line
// before a chart's series (help lines on), with tail after the units.
func appendChartComment(b []byte, c *store.ChartDef, kind, tail string) []byte {
	b = append(b, "\n# COMMENT "...)
	b = append(b, kind...)
	b = append(b, " chart \""...)
	b = appendCommentText(b, c.ID)
	b = append(b, "\", context \""...)
	b = appendCommentText(b, c.Context)
	b = append(b, "\", family \""...)
	b = appendCommentText(b, c.Family)
	b = append(b, "\", units \""...)
	b = appendCommentText(b, c.Units)
	b = append(b, '"')
	b = append(b, tail...)
	return append(b, '\n')
}
