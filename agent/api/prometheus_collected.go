package api

import (
	"strconv"

	"peerdns/agent/query"
	"peerdns/agent/store"
)

// appendPromCollected is allmetrics?format=prometheus&source=as-collected
// in Netdata's layout (exporting/prometheus: format_host_prometheus with
// EXPORTING_SOURCE_DATA_AS_COLLECTED): each dimension's value as the
// collector read it, stamped with the read time in milliseconds.
//
//   - A chart whose dimensions share algorithm, |multiplier| and |divisor|
//     (rrdset_update_heterogeneous_flag: sent = -received is still one
//     metric) is
//     one metric, <prefix>_<context>, with a dimension label; otherwise
//     each dimension is its own metric, <prefix>_<context>_<dimension>.
//   - Incremental dimensions are counters and end in _total; absolute
//     ones are gauges.
//
// Charts the agent computes from other charts (system.io and system.net
// sum the devices' rates) were never collected and are left out; their
// devices' charts carry the counters.
func (s *Server) appendPromCollected(b []byte, o *promOpts) []byte {
	typed := map[string]bool{}
	var name []byte
	for _, c := range s.o.DB.Charts() {
		if !o.filter.Match(c.ID, c.Name) {
			continue
		}
		at, raw, ok := s.o.Collected.Collected(c.ID)
		if !ok {
			continue
		}
		homogeneous := isHomogeneous(c)
		if o.help {
			kind := "heterogeneous"
			if homogeneous {
				kind = "homogeneous"
			}
			b = appendChartComment(b, c, kind, ", values as collected")
		}
		for i, d := range c.Dims {
			if i >= len(raw) || !finite(raw[i]) {
				continue
			}
			dimName := d.Name
			if o.useIDs || dimName == "" {
				dimName = d.ID
			}
			name = append(name[:0], o.prefix...)
			name = append(name, '_')
			name = promName(name, c.Context)
			if !homogeneous {
				name = append(name, '_')
				name = promName(name, dimName)
			}
			counter := d.Algorithm == "incremental"
			if counter {
				name = append(name, "_total"...)
			}
			if o.types && !typed[string(name)] {
				typed[string(name)] = true
				b = append(b, "# TYPE "...)
				b = append(b, name...)
				if counter {
					b = append(b, " counter\n"...)
				} else {
					b = append(b, " gauge\n"...)
				}
			}
			b = append(b, name...)
			b = append(b, `{chart="`...)
			b = promLabel(b, c.ID)
			b = append(b, `",family="`...)
			b = promLabel(b, c.Family)
			b = append(b, '"')
			if homogeneous {
				b = append(b, `,dimension="`...)
				b = promLabel(b, dimName)
				b = append(b, '"')
			}
			b = s.closeLabels(b, o)
			b = query.AppendNumber(b, raw[i])
			if o.timestamps {
				b = append(b, ' ')
				b = strconv.AppendInt(b, at.UnixMilli(), 10)
			}
			b = append(b, '\n')
		}
	}
	return b
}

func isHomogeneous(c *store.ChartDef) bool {
	if len(c.Dims) == 0 {
		return true
	}
	f := c.Dims[0]
	for _, d := range c.Dims[1:] {
		if d.Algorithm != f.Algorithm || abs64(d.Multiplier) != abs64(f.Multiplier) || abs64(d.Divisor) != abs64(f.Divisor) {
			return false
		}
	}
	return true
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
