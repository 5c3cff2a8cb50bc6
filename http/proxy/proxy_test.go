package proxy

import (
	"strings"
	"testing"
	"time"
)

func TestHostOf(t *testing.T) {
	for raw, want := range map[string]string{
		"site.p2p": "site.p2p", "SITE.P2P": "site.p2p", "site.p2p.": "site.p2p", "site.p2p:8080": "site.p2p",
		"Site.P2P.:443": "site.p2p", "[::1]:80": "::1", "127.0.0.1": "127.0.0.1", "": "",
	} {
		if got := hostOf(raw); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestAccessLineFormat(t *testing.T) {
	at := time.Date(2026, 12, 2, 14, 0, 0, 5, time.UTC)
	b := newAccessBatch()
	defer b.Release()
	for _, l := range []accessLine{
		{method: "GET", host: "a.p2p", path: "/x y", upstream: "", status: 200, bytes: 12, dur: 3 * time.Millisecond, at: at},
		{method: "POST", host: "b.p2p", path: "/" + strings.Repeat("p", 600), upstream: "hs://" + strings.Repeat("ab", 32), status: 502, bytes: -1, at: at.Add(time.Second)},
		{method: "HEAD", host: "c.p2p", path: "/", status: 404},
	} {
		l.appendTo(b)
	}
	want := []string{
		`time=2026-12-02T14:00:00.000000005Z level=INFO msg=request method=GET host=a.p2p path="/x y" status=200 bytes=12 ms=3 upstream=""`,
		"time=2026-12-02T14:00:01.000000005Z level=INFO msg=request method=POST host=b.p2p path=/" + strings.Repeat("p", 600) + " status=502 bytes=-1 ms=0 upstream=hs://" + strings.Repeat("ab", 32),
		"time=0001-01-01T00:00:00Z level=INFO msg=request method=HEAD host=c.p2p path=/ status=404 bytes=0 ms=0 upstream=\"\"",
	}
	if got := string(b.Text); got != strings.Join(want, "\n")+"\n" {
		t.Errorf("text %q", got)
	}
	ls := b.Lines()
	if len(ls) != len(want) {
		t.Fatalf("%d lines for 3", len(ls))
	}
	for i, l := range ls {
		if l.Message != want[i] || l.Channel != "httpProxy" || l.Level != "INFO" {
			t.Errorf("line %d = %+v, want message %q", i, l, want[i])
		}
	}
	if !ls[1].Time.Equal(at.Add(time.Second)) {
		t.Errorf("line 1 time %v", ls[1].Time)
	}
}

// Access lines cost no allocation once batches go round: each is
// formatted into a batch that the channel actor gave back.
func TestAccessLinesAllocateNothing(t *testing.T) {
	l := accessLine{method: "GET", host: "a.p2p", path: "/index.html", upstream: "hs://" + strings.Repeat("ab", 32), status: 200, bytes: 100, at: time.Now()}
	fill := func() {
		b := newAccessBatch()
		for range 100 {
			l.appendTo(b)
		}
		b.Release()
	}
	fill()
	// Under the race detector sync.Pool drops a share of what it is
	// given on purpose: the count holds without it.
	if n := testing.AllocsPerRun(100, fill); n >= 1 && !raceBuild {
		t.Fatalf("%v allocations for a batch of 100 lines", n)
	}
}

// FuzzHostOf: any Host header maps to a lower-case host without port,
// without panicking, and its one root dot is gone: a result that still
// ends in a dot comes from a host that ended in an empty label ("0.."),
// which names no site.
func FuzzHostOf(f *testing.F) {
	for _, s := range []string{"a.p2p:1", "[::1]:2", "A.B.", ":", "[", "x:y:z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h := hostOf(s)
		if h != strings.ToLower(h) || strings.HasSuffix(h, ".") && !strings.Contains(strings.ToLower(s), h+".") {
			t.Fatalf("hostOf(%q) = %q", s, h)
		}
	})
}

// appendValue quotes a value exactly when slog's text handler would
// for the characters it checks: empty, a space, a quote, '=', a
// backslash or a control character; other bytes (UTF-8 too) pass bare.
func TestAppendValue(t *testing.T) {
	for v, want := range map[string]string{
		"": `""`, "a.p2p": "a.p2p", "/x y": `"/x y"`, `a"b`: `"a\"b"`, "k=v": `"k=v"`, `a\b`: `"a\\b"`,
		"a\tb": `"a\tb"`, "a\x7fb": `"a\x7fb"`, "/é": "/é", "hs://ab": "hs://ab",
	} {
		if got := string(appendValue(nil, v)); got != want {
			t.Errorf("appendValue(%q) = %s, want %s", v, got, want)
		}
	}
}
