package cli

import (
	"errors"
	"testing"
)

// recordBody turns any command line into a body or a usage error, never
// a panic or another error.
func FuzzRecordBody(f *testing.F) {
	for _, s := range [][3]string{
		{"nas.home", "A", "192.0.2.5"}, {"mail.home", "mx", "10 mx.home"}, {"_sip._tcp.home", "SRV", "10 5 5060 sip.home"},
		{"x", "SRV", "a b c d"}, {"x", "MX", ""}, {"x", "CAA", "0 issue ca"}, {"", "", ""}, {"x", "TXT", "hello world"},
	} {
		f.Add(s[0], s[1], s[2], 300)
	}
	f.Fuzz(func(t *testing.T, name, typ, value string, ttl int) {
		body, err := recordBody(name, typ, value, ttl)
		var ee *exitError
		if err != nil && (!errors.As(err, &ee) || ee.code != ExitUsage) {
			t.Fatalf("recordBody(%q, %q, %q, %d): %v, want a usage error", name, typ, value, ttl, err)
		}
		if err == nil && (body["name"] != name || body["ttl"] != ttl) {
			t.Fatalf("recordBody(%q, %q, %q, %d) = %v", name, typ, value, ttl, body)
		}
	})
}

// lineName reads a metric name from any line without panicking, and
// the name it returns is a prefix of the line or its third field.
func FuzzLineName(f *testing.F) {
	for _, s := range []string{"# HELP go_goroutines Number of goroutines.", "# TYPE a counter", `a{b="c"} 1`, "a 1", "#", "# ", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		_ = lineName(line)
	})
}
