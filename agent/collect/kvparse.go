package collect

import (
	"bytes"
	"errors"
	"math"
)

var nan = math.NaN()

var errNoValues = errors.New("no values")

// parseNum parses a decimal integer or fraction ("-1", "123", "0.25")
// without allocating. strconv would do, but the /proc hot path parses
// thousands of numbers a second and this one skips the string conversion
// and the error value.
func parseNum(b []byte) (float64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	neg := false
	if b[0] == '-' {
		neg, b = true, b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	var ip uint64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		ip = ip*10 + uint64(b[i]-'0')
	}
	if i == 0 {
		return 0, false // no digit before the point (".", "x")
	}
	v := float64(ip)
	if i < len(b) && b[i] == '.' {
		i++
		scale := 0.1
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			v += float64(b[i]-'0') * scale
			scale /= 10
		}
	}
	if i != len(b) || i == 0 {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// parseKeyValue reads lines of "Key: 123 kB" (/proc/meminfo) or "key 123"
// (/proc/vmstat, /proc/net/snmp6). Lines that do not parse are skipped:
// an odd line from one kernel must not hide the others.
func parseKeyValue(b []byte, prefix string, kv *kvValues) error {
	n := 0
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		key, rest := firstField(line)
		if len(key) > 0 && key[len(key)-1] == ':' {
			key = key[:len(key)-1]
		}
		val, _ := firstField(rest)
		v, ok := parseNum(val)
		if len(key) == 0 || !ok {
			continue
		}
		kv.set(prefix, key, v)
		n++
	}
	if n == 0 {
		return errNoValues
	}
	return nil
}

// parseHeaderPairs reads /proc/net/snmp and /proc/net/netstat: a line of
// names "Tcp: RtoAlgorithm RtoMin ..." followed by a line of values
// "Tcp: 1 200 ...", stored as "Tcp.RtoMin". A values line that does not
// match its names line is skipped.
func parseHeaderPairs(b []byte, prefix string, kv *kvValues) error {
	n := 0
	var scratch [96]byte
	var names []byte
	for len(b) > 0 {
		if names == nil {
			names, b = nextLine(b)
			if len(b) == 0 {
				break
			}
		}
		var vals []byte
		vals, b = nextLine(b)
		np, nrest := firstField(names)
		vp, vrest := firstField(vals)
		if len(np) < 2 || np[len(np)-1] != ':' || !bytes.Equal(np, vp) {
			// out of step (a kernel printing an extra line): the values
			// line may be the next names line
			names = vals
			continue
		}
		names = nil
		p := append(append(scratch[:0], prefix...), np[:len(np)-1]...)
		p = append(p, '.')
		plen := len(p)
		for {
			var name, val []byte
			name, nrest = firstField(nrest)
			val, vrest = firstField(vrest)
			if len(name) == 0 || len(val) == 0 {
				break
			}
			if v, ok := parseNum(val); ok {
				p = append(p[:plen], name...)
				kv.set("", p, v)
				n++
			}
		}
	}
	if n == 0 {
		return errNoValues
	}
	return nil
}

// parseSockstat reads /proc/net/sockstat and sockstat6:
// "TCP: inuse 5 orphan 0 tw 0 alloc 7 mem 1" is stored as "TCP.inuse" ...
func parseSockstat(b []byte, prefix string, kv *kvValues) error {
	n := 0
	var scratch [64]byte
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		p, rest := firstField(line)
		if len(p) < 2 || p[len(p)-1] != ':' {
			continue
		}
		k := append(append(scratch[:0], prefix...), p[:len(p)-1]...)
		k = append(k, '.')
		klen := len(k)
		for {
			var name, val []byte
			name, rest = firstField(rest)
			val, rest = firstField(rest)
			if len(name) == 0 || len(val) == 0 {
				break
			}
			if v, ok := parseNum(val); ok {
				k = append(k[:klen], name...)
				kv.set("", k, v)
				n++
			}
		}
	}
	if n == 0 {
		return errNoValues
	}
	return nil
}

// parsePressure reads a /proc/pressure file:
// "some avg10=0.00 avg60=0.00 avg300=0.00 total=0" is stored as
// "<prefix>some.avg10" ...
func parsePressure(b []byte, prefix string, kv *kvValues) error {
	n := 0
	var scratch [64]byte
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		kind, rest := firstField(line)
		if len(kind) == 0 {
			continue
		}
		k := append(append(scratch[:0], prefix...), kind...)
		k = append(k, '.')
		klen := len(k)
		for {
			var f []byte
			f, rest = firstField(rest)
			if len(f) == 0 {
				break
			}
			name, val, ok := bytes.Cut(f, []byte{'='})
			if !ok {
				continue
			}
			if v, ok := parseNum(val); ok {
				k = append(k[:klen], name...)
				kv.set("", k, v)
				n++
			}
		}
	}
	if n == 0 {
		return errNoValues
	}
	return nil
}

// firstField returns the first space- or tab-separated field of b and
// what follows it.
func firstField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	j := i
	for j < len(b) && b[j] != ' ' && b[j] != '\t' {
		j++
	}
	return b[i:j], b[j:]
}
