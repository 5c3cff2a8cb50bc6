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
	l := accessLine{method: "GET", host: "a.p2p", path: "/x y", upstream: "", status: 200, bytes: 12, dur: 3 * time.Millisecond, at: time.Now()}.format()
	for _, want := range []string{"level=INFO msg=request method=GET host=a.p2p", `path="/x y"`, "status=200 bytes=12 ms=3", `upstream=""`} {
		if !strings.Contains(l.Message, want) {
			t.Fatalf("%q lacks %q", l.Message, want)
		}
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
