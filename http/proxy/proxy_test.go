package proxy

import (
	"crypto/tls"
	"log/slog"
	"strconv"
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

// appendValue quotes a value when slog's text handler would (empty, a
// space, a quote, '=', a control character, or beyond ASCII a rune that
// is not printable or is a space, such as a right-to-left override, or
// no rune at all), and also for a backslash or DEL, which slog leaves
// bare; anything else passes bare.
func TestAppendValue(t *testing.T) {
	for v, want := range map[string]string{
		"": `""`, "a.p2p": "a.p2p", "/x y": `"/x y"`, `a"b`: `"a\"b"`, "k=v": `"k=v"`, `a\b`: `"a\\b"`,
		"a\tb": `"a\tb"`, "a\x7fb": `"a\x7fb"`, "/é": "/é", "hs://ab": "hs://ab", "日本.p2p": "日本.p2p",
		"evil\u202e.p2p": `"evil\u202e.p2p"`, "a\u00a0b": `"a\u00a0b"`, "a\u200bb": `"a\u200bb"`,
		"\xff": `"\xff"`, "/ü\xc3": `"/ü\xc3"`, "a\u2028b": `"a\u2028b"`,
	} {
		if got := string(appendValue(nil, v)); got != want {
			t.Errorf("appendValue(%q) = %s, want %s", v, got, want)
		}
	}
}

// FuzzAppendValue: appendValue writes a value bare or as strconv.Quote
// writes it, quoted whenever slog's text handler quotes it, and bare
// whenever slog leaves it bare but for a backslash or DEL.
func FuzzAppendValue(f *testing.F) {
	for _, s := range []string{"a.p2p", "evil\u202e.p2p", "\xff=", "a b", `a\b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := string(appendValue(nil, v))
		quoted := got == strconv.Quote(v)
		if !quoted && got != v {
			t.Fatalf("appendValue(%q) = %s: neither bare nor quoted", v, got)
		}
		slogQuotes := slogValue(v) != v
		if slogQuotes && !quoted {
			t.Fatalf("appendValue(%q) = %s, bare where slog quotes it", v, got)
		}
		if quoted && !slogQuotes && !strings.ContainsAny(v, "\\\x7f") {
			t.Fatalf("appendValue(%q) = %s, quoted where slog leaves it bare", v, got)
		}
	})
}

// slogValue is v as slog's text handler writes an attribute's value.
func slogValue(v string) string {
	var b strings.Builder
	h := slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
			return slog.Attr{}
		}
		return a
	}})
	slog.New(h).Info("", "v", v)
	return strings.TrimSuffix(strings.TrimPrefix(b.String(), "v="), "\n")
}

// A peer may claim a name outside .p2p (bank.example.com): the edge
// serves it over HTTP only and issues no leaf for it, even from a root
// without name constraints (one made before they existed, which signs
// for any name and may be in the user's trust store); a name under .p2p
// gets its leaf from the same root.
func TestEdgeIssuesNoLeafForPeerNameOutsideP2P(t *testing.T) {
	e := newTestH2Edge(t, map[string]string{"shop.p2p": "127.0.0.1:9", "bank.example.com": "127.0.0.1:9"}, Deps{})
	_, addr := e.s.Addrs()
	pool := e.s.d.CA.Pool()
	for _, sni := range []string{"bank.example.com", "www.bank.example.com"} {
		c, err := tls.Dial("tcp", addr.String(), &tls.Config{RootCAs: pool, ServerName: sni})
		if err == nil {
			c.Close()
			t.Errorf("handshake for %s succeeded with a leaf of the node's root", sni)
		}
	}
	c, err := tls.Dial("tcp", addr.String(), &tls.Config{RootCAs: pool, ServerName: "shop.p2p"})
	if err != nil {
		t.Fatalf("handshake for shop.p2p: %v", err)
	}
	c.Close()
	list, err := e.s.d.CA.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Domain != "shop.p2p" {
		t.Fatalf("leaves issued: %+v, want shop.p2p only", list)
	}
}
