package api

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"peerdns/agent/health"
	"peerdns/agent/query"
	"peerdns/agent/store"
	"peerdns/http/httpx"
)

// Badge colours by name (shields.io's palette, which Netdata uses).
var badgeColors = map[string]string{
	"brightgreen": "#4c1", "green": "#97CA00", "yellow": "#dfb317", "yellowgreen": "#a4a61d",
	"orange": "#fe7d37", "red": "#e05d44", "blue": "#007ec6", "grey": "#555", "gray": "#555",
	"lightgrey": "#9f9f9f", "lightgray": "#9f9f9f",
}

const (
	colorLabel   = "#555"
	colorValue   = "#4c1"
	colorUnknown = "#999"
)

// colorValueOf resolves a colour name or hex (with or without '#').
func colorValueOf(s string) string {
	if c, ok := badgeColors[strings.ToLower(s)]; ok {
		return c
	}
	s = strings.TrimPrefix(s, "#")
	if (len(s) == 3 || len(s) == 6) && strings.Trim(strings.ToLower(s), "0123456789abcdef") == "" {
		return "#" + s
	}
	return ""
}

// pickValueColor evaluates Netdata's value_color (calc_colorz): terms
// separated by '|', each a colour then optionally a comparison and a
// number ("green<10", "grey:null"). ':' and '=' compare for equality,
// '!'/"!=" and "<>" for inequality, '<', "<=", '>', ">="; '(' and '{'
// read as '<', ')' and '}' as '>'; "null" or nothing after the operator
// is no value, which only equals no value. The first term that holds
// names the colour; a term without a comparison always holds; when none
// holds, the last term's colour is used, as Netdata does. The name is
// resolved by colorValueOf ("" when unknown).
func pickValueColor(spec string, v float64) string {
	color := ""
	for term := range strings.SplitSeq(spec, "|") {
		name, op, val, hasOp := splitColorTerm(term)
		color = name
		if !hasOp {
			break
		}
		n := math.NaN()
		if val != "" && val != "null" {
			n, _ = strconv.ParseFloat(strings.TrimSpace(val), 64) // Netdata reads an unreadable number as 0
		}
		if math.IsNaN(v) || math.IsNaN(n) {
			if math.IsNaN(v) && math.IsNaN(n) {
				break
			}
			continue
		}
		if op == "<" && v < n || op == "<=" && v <= n || op == ">" && v > n || op == ">=" && v >= n ||
			op == "=" && v == n || op == "!=" && v != n {
			break
		}
	}
	if color == "" {
		color = spec
	}
	return colorValueOf(color)
}

// splitColorTerm splits one value_color term as Netdata reads it: the
// colour is what comes before the first operator, the comparison is the
// last operator and the value what follows it.
func splitColorTerm(term string) (name, op, val string, hasOp bool) {
	var nb, vb []byte
	for i := 0; i < len(term); i++ {
		c := term[i]
		next := byte(0)
		if i+1 < len(term) {
			next = term[i+1]
		}
		o := ""
		switch c {
		case '!':
			o = "!="
			if next == '=' {
				i++
			}
		case '=', ':':
			o = "="
		case '>', ')', '}':
			o = ">"
			if next == '=' {
				o = ">="
				i++
			}
		case '<', '(', '{':
			o = "<"
			switch next {
			case '=':
				o = "<="
				i++
			case '>', ')', '}':
				o = "!="
				i++
			}
		}
		switch {
		case o != "":
			op, hasOp, vb = o, true, vb[:0]
		case hasOp:
			vb = append(vb, c)
		default:
			nb = append(nb, c)
		}
	}
	return string(nb), op, string(vb), hasOp
}

// formatValue is Netdata's value + units text: automatic precision when
// precision < 0, "%" glued to the number, other units after a space.
func formatValue(v float64, units string, precision int) string {
	if !finite(v) {
		return "-"
	}
	if units == "percentage" || units == "percent" {
		units = "%"
	}
	if precision < 0 {
		a := math.Abs(v)
		switch {
		case a >= 1000:
			precision = 0
		case a >= 10:
			precision = 1
		case a >= 0.1:
			precision = 2
		case a >= 0.01:
			precision = 4
		case a == 0:
			precision = 0
		default:
			precision = 6
		}
	}
	s := strconv.FormatFloat(v, 'f', precision, 64)
	if s == "-0" {
		s = "0"
	}
	switch units {
	case "":
		return s
	case "%":
		return s + "%"
	}
	return s + " " + units
}

// verdana11 approximates the advance width of a character in 11px
// Verdana/DejaVu Sans, so the badge is sized on the server (Netdata's
// badges carry a width table for the same reason).
func verdana11(s string) float64 {
	w := 0.0
	for _, r := range s {
		switch {
		case r == ' ':
			w += 3.87
		case r == '.' || r == ',' || r == ':' || r == ';' || r == 'i' || r == 'l' || r == '|' || r == '!' || r == '\'':
			w += 3.02
		case r == 'f' || r == 't' || r == 'r' || r == 'j' || r == '(' || r == ')' || r == '-' || r == '[' || r == ']':
			w += 4.5
		case r == 'm' || r == 'w' || r == 'M' || r == 'W':
			w += 10.2
		case r == '%':
			w += 11.8
		case r >= '0' && r <= '9':
			w += 7.0
		case r >= 'A' && r <= 'Z':
			w += 7.6
		case r >= 'a' && r <= 'z':
			w += 6.5
		default:
			w += 7.0
		}
	}
	return w
}

func xmlEscape(b []byte, s string) []byte {
	for _, r := range s {
		switch r {
		case '<':
			b = append(b, "&lt;"...)
		case '>':
			b = append(b, "&gt;"...)
		case '&':
			b = append(b, "&amp;"...)
		case '"':
			b = append(b, "&quot;"...)
		case '\'':
			b = append(b, "&apos;"...)
		default:
			b = append(b, string(r)...)
		}
	}
	return b
}

func f2(b []byte, v float64) []byte { return strconv.AppendFloat(b, v, 'f', 2, 64) }

// renderBadge draws a flat two-part badge like Netdata's badge.svg.
func renderBadge(label, value, labelColor, valueColor string) []byte {
	const pad = 4.0
	lw := verdana11(label) + 2*pad
	vw := verdana11(value) + 2*pad
	tw := lw + vw
	b := make([]byte, 0, 1400)
	b = append(b, `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="`...)
	b = f2(b, tw)
	b = append(b, `" height="20.00"><linearGradient id="smooth" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient><mask id="round"><rect class="bdge-ttl-width" width="`...)
	b = f2(b, tw)
	b = append(b, `" height="20.00" rx="3.00" fill="#fff"/></mask><g mask="url(#round)"><rect class="bdge-rect-lbl" width="`...)
	b = f2(b, lw)
	b = append(b, `" height="20.00" fill="`...)
	b = xmlEscape(b, labelColor)
	b = append(b, `"/><rect class="bdge-rect-val" x="`...)
	b = f2(b, lw)
	b = append(b, `" width="`...)
	b = f2(b, vw)
	b = append(b, `" height="20.00" fill="`...)
	b = xmlEscape(b, valueColor)
	b = append(b, `"/><rect class="bdge-ttl-width" width="`...)
	b = f2(b, tw)
	b = append(b, `" height="20.00" fill="url(#smooth)"/></g><g text-anchor="middle" font-family="DejaVu Sans,Verdana,Geneva,sans-serif" font-size="11.00">`...)
	text := func(class string, x float64, y int, shadow bool, s string) {
		b = append(b, `<text class="`...)
		b = append(b, class...)
		b = append(b, `" x="`...)
		b = f2(b, x)
		b = append(b, `" y="`...)
		b = strconv.AppendInt(b, int64(y), 10)
		if shadow {
			b = append(b, `" fill="#010101" fill-opacity=".3">`...)
		} else {
			b = append(b, `" fill="#fff">`...)
		}
		b = xmlEscape(b, s)
		b = append(b, `</text>`...)
	}
	text("bdge-lbl-lbl", lw/2, 15, true, label)
	text("bdge-lbl-lbl", lw/2, 14, false, label)
	text("bdge-lbl-val", lw+vw/2, 15, true, value)
	text("bdge-lbl-val", lw+vw/2, 14, false, value)
	return append(b, `</g></svg>`...)
}

// badge renders /api/v1/badge.svg: the chart's value over the window
// (default: the latest point), summed over the selected dimensions, or an
// alert's value with the colour of its status (alarm=name; an alert the
// chart does not have is the "alarm not found" badge). value_color,
// multiply and divide apply to both. Without
// label= it is labelled with the dimensions asked for (the chart's name
// when none), and without units= a percentage query's units are "%".
// refresh=
// (seconds or auto) sets the Refresh header that makes a browser reload
// an embedded badge, as Netdata's badges do.
func (s *Server) badge(ctx *fasthttp.RequestCtx, _ int) error {
	chartID, _ := arg(ctx, "chart")
	if chartID == "" {
		return httpx.BadRequest("No chart id is given at the request.")
	}
	labelColor := colorLabel
	if lc, ok := arg(ctx, "label_color"); ok && colorValueOf(lc) != "" {
		labelColor = colorValueOf(lc)
	}
	precision := -1
	if p, ok := arg(ctx, "precision"); ok && p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < -1 || n > 12 {
			return httpx.BadRequest("precision must be an integer from -1 to 12, got %q", trimArg(p))
		}
		precision = n
	}
	refresh, auto, err := badgeRefresh(ctx)
	if err != nil {
		return err
	}
	mul, div := 1.0, 1.0
	if m, ok := arg(ctx, "multiply"); ok && m != "" {
		if mul, err = strconv.ParseFloat(m, 64); err != nil {
			return httpx.BadRequest("multiply must be a number, got %q", trimArg(m))
		}
	}
	if d, ok := arg(ctx, "divide"); ok && d != "" {
		if div, err = strconv.ParseFloat(d, 64); err != nil || div == 0 {
			return httpx.BadRequest("divide must be a non-zero number, got %q", trimArg(d))
		}
	}
	c, ok := s.o.DB.Chart(chartID)
	if !ok {
		s.svg(ctx, renderBadge("chart not found", "-", labelColor, colorUnknown))
		return nil
	}
	label, hasLabel := arg(ctx, "label")
	units, hasUnits := arg(ctx, "units")
	if !hasUnits {
		units = c.Units
	}
	if alarm, ok := arg(ctx, "alarm"); ok && alarm != "" {
		var found *health.Alert
		for _, a := range s.alerts() {
			if a.Chart == c.ID && a.Name == alarm {
				found = &a
				break
			}
		}
		if found == nil {
			s.svg(ctx, renderBadge("alarm not found", "-", labelColor, colorUnknown))
			return nil
		}
		if !hasLabel {
			label = strings.ReplaceAll(alarm, "_", " ")
		}
		if !hasUnits {
			units = found.Units
		}
		if auto {
			refresh = found.UpdateEvery
		}
		setRefresh(ctx, refresh)
		color := badgeColors["grey"]
		switch found.Status {
		case health.StatusClear:
			color = colorValue
		case health.StatusWarning:
			color = badgeColors["orange"]
		case health.StatusCritical:
			color = badgeColors["red"]
		case health.StatusUndefined:
			color = badgeColors["lightgrey"]
		}
		v := found.Value * mul / div
		s.svg(ctx, renderBadge(label, formatValue(v, units, precision), labelColor, valueColor(ctx, color, v)))
		return nil
	}
	req, err := query.ParseRequest(getter(ctx))
	if err != nil {
		return httpx.BadRequest("%v", err)
	}
	if _, ok := arg(ctx, "after"); !ok {
		req.After = -int64(max(c.UpdateEvery, 1))
	}
	if _, ok := arg(ctx, "points"); !ok {
		req.Points = 1
	}
	req.Chart, req.Context, req.Format, req.Options = c.ID, "", query.FormatArray, req.Options&^query.OptJSONWrap
	// Netdata's defaults: the dimensions asked for name the badge, and
	// a percentage is in "%".
	if !hasLabel {
		label = c.Name
		if req.Dimensions != "" {
			label = req.Dimensions
		}
	}
	if !hasUnits && req.Options&query.OptPercentage != 0 {
		units = "%"
	}
	if auto {
		refresh = badgeWindow(req, c, s.now().Unix())
	}
	setRefresh(ctx, refresh)
	v := math.NaN()
	res, _, err := s.runQuery(store.ReadBadge, &req, []*store.ChartDef{c}, s.now().Unix())
	if err != nil {
		var he *httpx.Error
		if !errors.As(err, &he) || he.Status != fasthttp.StatusNotFound {
			return err
		}
		// No dimension matched: Netdata still draws a badge, valued "-".
	} else if rows := res.Rows(); rows > 0 {
		// The newest point, summed over the selected dimensions.
		sum, n := 0.0, 0
		for col := range res.Columns {
			if x := res.At(rows-1, col); !math.IsNaN(x) {
				sum += x
				n++
			}
		}
		if n > 0 {
			v = sum
		}
	}
	v *= mul / div
	color := colorValue
	if math.IsNaN(v) {
		color = colorUnknown
	}
	s.svg(ctx, renderBadge(label, formatValue(v, units, precision), labelColor, valueColor(ctx, color, v)))
	return nil
}

// valueColor is the badge's value colour: value_color's pick for v
// when given and known, else def.
func valueColor(ctx *fasthttp.RequestCtx, def string, v float64) string {
	if vc, ok := arg(ctx, "value_color"); ok && vc != "" {
		if c := pickValueColor(vc, v); c != "" {
			return c
		}
	}
	return def
}

// maxBadgeRefresh bounds refresh= (a day).
const maxBadgeRefresh = 86400

// badgeRefresh reads refresh=: seconds (Netdata takes the absolute
// value), 0 or none for no Refresh header, or auto (the caller picks the
// interval).
func badgeRefresh(ctx *fasthttp.RequestCtx) (secs int, auto bool, err error) {
	v, ok := arg(ctx, "refresh")
	if !ok || v == "" {
		return 0, false, nil
	}
	if v == "auto" {
		return 0, true, nil
	}
	n, perr := strconv.Atoi(v)
	if perr != nil || n < -maxBadgeRefresh || n > maxBadgeRefresh {
		return 0, false, httpx.BadRequest("refresh must be auto or seconds (up to %d), got %q", maxBadgeRefresh, trimArg(v))
	}
	return max(n, -n), false, nil
}

// badgeWindow is refresh=auto's interval for a chart badge, as Netdata
// picks it: the chart's update interval for an unaligned query, else the
// seconds its window covers.
func badgeWindow(req query.Request, c *store.ChartDef, now int64) int {
	if req.Options&query.OptUnaligned != 0 {
		return max(c.UpdateEvery, 1)
	}
	a, b := req.After, req.Before
	if a < 0 && -a <= query.RelativeMax || a >= 0 && a <= query.RelativeMax {
		return int(min(max(a, -a), maxBadgeRefresh)) // counted back from before
	}
	if b <= 0 && -b <= query.RelativeMax {
		b += now
	}
	return int(min(max(b-a, a-b), maxBadgeRefresh))
}

// setRefresh sets the Refresh header, which makes a browser reload the
// badge (in an <embed> or <iframe>) every secs seconds; 0 sets none.
func setRefresh(ctx *fasthttp.RequestCtx, secs int) {
	if secs > 0 {
		ctx.Response.Header.Set("Refresh", strconv.Itoa(secs))
	}
}

func (s *Server) svg(ctx *fasthttp.RequestCtx, body []byte) {
	setBody(ctx, "image/svg+xml", body)
}
