package api

import (
	"math"
	"slices"
	"strconv"

	"github.com/valyala/fasthttp"

	"peerdns/agent/health"
	"peerdns/agent/query"
	"peerdns/http/httpx"
	"peerdns/messages"
)

// allmetrics serves Netdata's allmetrics in its three formats: shell
// variables, a JSON object per chart and the Prometheus exposition
// (prometheus.go). Every format shows each chart's newest values.

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

// appendRounded is the shell format's value: rounded to an integer,
// empty when there is no value.
func appendRounded(b []byte, v float64) []byte {
	if !finite(v) {
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
		b = appendCommentText(b, c.ID)
		b = append(b, " (name: "...)
		b = appendCommentText(b, c.Name)
		b = append(b, ")\n"...)
		total := 0.0
		for i, d := range c.Dims {
			v := math.NaN()
			if i < len(vals) {
				v = vals[i]
			}
			if !d.Hidden && finite(v) {
				total += v
			}
			b = append(b, "NETDATA_"...)
			b = shellName(b, c.ID)
			b = append(b, '_')
			b = shellName(b, d.Name)
			b = append(b, "=\""...)
			b = appendRounded(b, v)
			b = append(b, "\"      # "...)
			b = appendCommentText(b, c.Units)
			b = append(b, '\n')
		}
		b = append(b, "NETDATA_"...)
		b = shellName(b, c.ID)
		b = append(b, "_VISIBLETOTAL=\""...)
		b = appendRounded(b, total)
		b = append(b, "\"      # "...)
		b = appendCommentText(b, c.Units)
		b = append(b, '\n')
	}
	// Every alarm, whatever the filter: Netdata's filter picks charts
	// only (its filter=system.cpu answer lists system.ram's alarms).
	b = append(b, "\n# NETDATA ALARMS RUNNING\n"...)
	for _, a := range alerts {
		b = append(b, "NETDATA_ALARM_"...)
		b = shellName(b, a.Chart)
		b = append(b, '_')
		b = shellName(b, a.Name)
		b = append(b, "_VALUE=\""...)
		b = appendRounded(b, a.Value)
		b = append(b, "\"      # "...)
		b = appendCommentText(b, a.Units)
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

// appendAllJSON renders Netdata's allmetrics?format=json object, byte for
// byte in Netdata's layout (chart order, %0.7f values). Written by hand
// because scripts and home-automation integrations poll it every few
// seconds: BenchmarkAllmetricsJSON measures it. export reuses it for its
// "charts" member, so the two never differ.
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
		b = messages.AppendJSONString(b, c.ID)
		b = append(b, ": {\n\t\t\"name\":"...)
		b = messages.AppendJSONString(b, c.Name)
		b = append(b, ",\n\t\t\"family\":"...)
		b = messages.AppendJSONString(b, c.Family)
		b = append(b, ",\n\t\t\"context\":"...)
		b = messages.AppendJSONString(b, c.Context)
		b = append(b, ",\n\t\t\"units\":"...)
		b = messages.AppendJSONString(b, c.Units)
		b = append(b, ",\n\t\t\"last_updated\": "...)
		b = strconv.AppendInt(b, t, 10)
		b = append(b, ",\n\t\t\"dimensions\": {"...)
		for i, d := range c.Dims {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, "\n\t\t\t"...)
			b = messages.AppendJSONString(b, d.ID)
			b = append(b, ": {\n\t\t\t\t\"name\": "...)
			b = messages.AppendJSONString(b, d.Name)
			b = append(b, ",\n\t\t\t\t\"value\": "...)
			if i < len(vals) && finite(vals[i]) {
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
	collected := false
	switch src, _ := arg(ctx, "source"); src {
	case "", "average":
	case "as-collected", "as_collected", "raw":
		if format != "prometheus" && format != "prometheus_all_hosts" {
			return httpx.BadRequest("source=%s is answered for format=prometheus and prometheus_all_hosts only", src)
		}
		if s.o.Collected == nil {
			return httpx.BadRequest("source=as-collected is not available: no collector runs in this agent")
		}
		collected = true
	default:
		return httpx.BadRequest("source %q is not supported: use average or as-collected", trimArg(src))
	}
	buf := getBuf()
	defer putBuf(buf)
	switch format {
	case "prometheus", "prometheus_all_hosts":
		s.counters.prom.Add(1)
		o, err := parsePromOpts(ctx)
		if err != nil {
			return err
		}
		o.instance = format == "prometheus_all_hosts"
		o.collected = collected
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
