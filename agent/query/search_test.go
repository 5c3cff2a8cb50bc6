package query

import "testing"

// TestSearchPattern: q's pattern is case-insensitive, a plain word matches
// inside a string, a word with '*' globs the whole string, '!' excludes,
// the first matching word decides, and ',' '|' (not space) separate words.
func TestSearchPattern(t *testing.T) {
	cases := []struct {
		q, s string
		want SearchResult
	}{
		{"cpu", "system.CPU", SearchPositive},
		{"cpu", "disk.io", SearchNone},
		{"sys*", "system.cpu", SearchPositive},
		{"sys*", "cpu.system", SearchNone}, // a glob is anchored
		{"*cpu", "system.cpu", SearchPositive},
		{"*cpu", "cpu.system", SearchNone},
		{"s*m.c*u", "system.cpu", SearchPositive},
		{"*ste*", "system.cpu", SearchPositive},
		{"!system*|cpu", "system.cpu", SearchNegative},
		{"cpu|!system*", "system.cpu", SearchPositive}, // first match decides
		{"disk|cpu", "cpu.cpu0", SearchPositive},
		{"disk,cpu", "cpu.cpu0", SearchPositive},
		{"load average", "System Load Average", SearchPositive},
		{"load average", "load", SearchNone}, // space is inside the word
		{" cpu | disk ", "disk.io", SearchPositive},
	}
	for _, c := range cases {
		if got := CompileSearch(c.q).Test(c.s); got != c.want {
			t.Errorf("%q on %q = %d, want %d", c.q, c.s, got, c.want)
		}
	}
	for _, q := range []string{"", "*", " | , "} {
		if p := CompileSearch(q); p != nil || p.Match("x") {
			t.Errorf("%q: pattern %v, want nil matching nothing", q, p)
		}
	}
}
