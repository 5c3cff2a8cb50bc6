package httpx

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"peerdns/internal/testutil"
)

func newTestGuard(t testing.TB, addr string) *Guard {
	t.Helper()
	g, err := NewGuard(addr, []string{"admin.p2p", "panel.lan:8443", "10.0.0.5"})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

var hostCases = []struct {
	host string
	want bool
}{
	{"127.0.0.1:7710", true},
	{"127.0.0.1", true},
	{"127.9.8.7:1", true},
	{"[::1]:7710", true},
	{"[::1]", true},
	{"[::ffff:127.0.0.1]:80", true},
	{"localhost", true},
	{"LocalHost:9999", true},
	{"localhost.:7710", true},
	{"admin.p2p", true},
	{"ADMIN.P2P:7710", true},
	{"admin.p2p.", true},
	{"panel.lan:8443", true},
	{"10.0.0.5:1234", true},
	{"evil.example", false},
	{"evil.example:7710", false},
	{"panel.lan", false},
	{"panel.lan:8444", false},
	{"localhost.evil.example", false},
	{"sub.localhost", false},
	{"admin.p2p.evil.example", false},
	{"192.168.1.5:7710", false},
	{"0.0.0.0:7710", false},
	{"[::]:7710", false},
	{"::1", false},
	{"[::1", false},
	{"[::1]x", false},
	{"[127.0.0.1]:80", false},
	{"[fe80::1%25lo]:80", false},
	{"localhost:0", false},
	{"localhost:65536", false},
	{"localhost:-1", false},
	{"localhost:+80", false},
	{"localhost:abc", false},
	{"user@localhost", false},
	{"localhost/x", false},
	{"local host", false},
	{"2130706433", false}, // 127.0.0.1 as a number: not how browsers send it
	{"", false},
	{":7710", false},
}

func TestHostAllowed(t *testing.T) {
	g := newTestGuard(t, "127.0.0.1:7710")
	for _, tt := range hostCases {
		if got := g.HostAllowed(tt.host); got != tt.want {
			t.Errorf("HostAllowed(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}

func TestHostAllowedByBoundAddress(t *testing.T) {
	tests := []struct {
		name, addr, host string
		want             bool
	}{
		{"specific address, its port", "192.168.1.5:7710", "192.168.1.5:7710", true},
		{"specific address, other port", "192.168.1.5:7710", "192.168.1.5:7711", false},
		{"specific address, default port", "192.168.1.5:80", "192.168.1.5", true},
		{"unspecified v4, any IP on the port", "0.0.0.0:7710", "192.168.1.5:7710", true},
		{"unspecified v6, any IP on the port", "[::]:7710", "[2001:db8::1]:7710", true},
		{"unspecified, other port", "0.0.0.0:7710", "192.168.1.5:80", false},
		{"unspecified, a name is not an IP", "0.0.0.0:7710", "evil.example:7710", false},
		{"no address: loopback still", "", "127.0.0.1:1", true},
		{"no address: nothing else", "", "192.168.1.5:7710", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewGuard(tt.addr, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := g.HostAllowed(tt.host); got != tt.want {
				t.Fatalf("NewGuard(%q).HostAllowed(%q) = %v, want %v", tt.addr, tt.host, got, tt.want)
			}
		})
	}
}

func TestNewGuardReportsBadEntries(t *testing.T) {
	g, err := NewGuard("127.0.0.1:7710", []string{"ok.lan", "bad host", "x:99999"})
	if err == nil || !strings.Contains(err.Error(), `"bad host"`) || !strings.Contains(err.Error(), `"x:99999"`) {
		t.Fatalf("NewGuard error = %v, want both bad entries named", err)
	}
	if !g.HostAllowed("ok.lan") || g.HostAllowed("x") {
		t.Fatal("the good entry must still work and the bad ones allow nothing")
	}
	if _, err := NewGuard("localhost", nil); err == nil {
		t.Fatal("a listen address without port must be reported")
	}
}

var originCases = []struct {
	origin string
	want   bool
}{
	{"http://127.0.0.1:7710", true},
	{"https://localhost", true},
	{"HTTP://LOCALHOST:3000", true},
	{"http://[::1]:7710", true},
	{"https://admin.p2p", true},
	{"http://panel.lan:8443", true},
	{"null", false},
	{"", false},
	{"https://evil.example", false},
	{"http://127.0.0.1.evil.example", false},
	{"ftp://localhost", false},
	{"file://", false},
	{"chrome-extension://abc", false},
	{"http://localhost/", false},
	{"http://localhost?x", false},
	{"http://evil@localhost", false},
	{"http://localhost\\@evil.example", false},
	{"localhost", false},
	{"//localhost", false},
}

func TestOriginAllowed(t *testing.T) {
	g := newTestGuard(t, "127.0.0.1:7710")
	for _, tt := range originCases {
		if got := g.OriginAllowed(tt.origin); got != tt.want {
			t.Errorf("OriginAllowed(%q) = %v, want %v", tt.origin, got, tt.want)
		}
	}
}

// TestGuardWrap drives a guarded handler with a real client, as a browser
// page and as curl would.
func TestGuardWrap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	g := newTestGuard(t, addr)
	var reached int
	h := g.Wrap(nil, func(ctx *fasthttp.RequestCtx) {
		reached++
		if GuardOf(ctx) != g {
			ctx.SetStatusCode(500)
			return
		}
		ctx.SetBodyString("OK")
	})
	srv := &fasthttp.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(); <-done })

	self := "http://" + addr
	tests := []struct {
		name, method, host string
		hdr                map[string]string
		body               string
		want               int
		msg                string
	}{
		{"curl GET", "GET", "", nil, "", 200, "OK"},
		{"curl bodyless POST", "POST", "", nil, "", 200, "OK"},
		{"curl JSON POST", "POST", "", map[string]string{"Content-Type": "application/json"}, `{}`, 200, "OK"},
		{"JSON with charset", "POST", "", map[string]string{"Content-Type": "Application/JSON; charset=utf-8"}, `{}`, 200, "OK"},
		{"localhost Host", "GET", "localhost:1234", nil, "", 200, "OK"},
		{"admin domain Host", "GET", "admin.p2p", nil, "", 200, "OK"},
		{"same-origin page", "POST", "", map[string]string{"Origin": self, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}, `{}`, 200, "OK"},
		{"typed address", "GET", "", map[string]string{"Sec-Fetch-Site": "none"}, "", 200, "OK"},
		{"the API's own origin, no Sec-Fetch-Site (a WebSocket handshake)", "GET", "", map[string]string{"Origin": self}, "", 200, "OK"},
		{"admin domain page, no Sec-Fetch-Site", "GET", "admin.p2p", map[string]string{"Origin": "https://admin.p2p"}, "", 200, "OK"},
		{"listed name's page, Host rewritten by a reverse proxy, no Sec-Fetch-Site", "GET", "", map[string]string{"Origin": "https://panel.lan:8443"}, "", 200, "OK"},
		{"same-site page of a listed name", "GET", "", map[string]string{"Origin": "https://panel.lan:8443", "Sec-Fetch-Site": "same-site"}, "", 200, "OK"},

		{"rebinding Host", "GET", "evil.example", nil, "", 421, `"evil.example"`},
		{"rebinding Host with our port", "GET", "evil.example:7710", nil, "", 421, `"evil.example:7710"`},
		{"cross-site text/plain form", "POST", "", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}, `{"domain":"x.p2p"}`, 403, `"https://evil.example"`},
		{"foreign Origin alone", "POST", "", map[string]string{"Origin": "https://evil.example"}, "", 403, "origin"},
		{"null Origin", "POST", "", map[string]string{"Origin": "null"}, "", 403, `"null"`},
		{"cross-site, Origin stripped", "POST", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, "", 403, "cross-site"},
		{"cross-site with an allowed Origin", "POST", "", map[string]string{"Origin": "https://panel.lan:8443", "Sec-Fetch-Site": "cross-site"}, "", 403, "cross-site"},
		{"same host, another port (another local program's page), same-site", "POST", "", map[string]string{"Origin": "http://127.0.0.1:3000", "Sec-Fetch-Site": "same-site"}, "", 403, "another site"},
		{"same host, another port, no Sec-Fetch-Site", "GET", "", map[string]string{"Origin": "http://127.0.0.1:3000"}, "", 403, "another site"},
		{"same-site without Origin", "POST", "", map[string]string{"Sec-Fetch-Site": "same-site"}, "", 403, "same-site"},
		{"allowed Origin of another loopback IP, no Sec-Fetch-Site (a WebSocket handshake)", "GET", "", map[string]string{"Origin": "http://127.77.0.5:8080"}, "", 403, "another site"},
		{"allowed Origin localhost against 127.0.0.1, no Sec-Fetch-Site", "POST", "", map[string]string{"Origin": "http://localhost:3000"}, "", 403, "another site"},
		{"unknown Sec-Fetch-Site", "GET", "", map[string]string{"Sec-Fetch-Site": "sideways"}, "", 403, "sideways"},
		{"text/plain body, no Origin", "POST", "", map[string]string{"Content-Type": "text/plain"}, `{"a":1}`, 415, "application/json"},
		{"urlencoded form, empty body", "POST", "", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "", 415, "application/x-www-form-urlencoded"},
		{"multipart", "POST", "", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, "--x--", 415, "multipart"},
		{"body without Content-Type", "POST", "", nil, `{}`, 415, "got none"},
		{"JSON look-alike", "POST", "", map[string]string{"Content-Type": "application/jsonp"}, `{}`, 415, "jsonp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := reached
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, err := http.NewRequest(tt.method, self+"/api/x", body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			for k, v := range tt.hdr {
				req.Header.Set(k, v)
			}
			resp, err := testutil.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got := readAll(t, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want || !strings.Contains(got, tt.msg) {
				t.Fatalf("%s = %d %q, want %d containing %q", tt.name, resp.StatusCode, got, tt.want, tt.msg)
			}
			if (reached > before) != (tt.want == 200) {
				t.Fatalf("handler reached = %v for status %d", reached > before, resp.StatusCode)
			}
			if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Fatalf("headers = %v, want X-Frame-Options DENY and nosniff", resp.Header)
			}
		})
	}

	// An absolute request line names its own host, which must pass too.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET http://evil.example/api/x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
	raw, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(raw), "HTTP/1.1 421") {
		t.Fatalf("absolute-form request for evil.example = %q, want 421", raw)
	}
}

// FuzzGuardHost checks the Host and Origin parsing on any input: it never
// panics, is case-insensitive, reads an Origin's authority exactly as a
// Host, and admits only hosts made of host-name characters.
func FuzzGuardHost(f *testing.F) {
	for _, tt := range hostCases {
		f.Add(tt.host)
	}
	for _, tt := range originCases {
		f.Add(tt.origin)
	}
	g := newTestGuard(f, "127.0.0.1:7710")
	f.Fuzz(func(t *testing.T, s string) {
		allowed := g.HostAllowed(s)
		// ASCII only: Unicode case mapping turns 'ſ' into 'S'.
		if isASCII(s) && g.HostAllowed(strings.ToUpper(s)) != allowed {
			t.Fatalf("HostAllowed(%q) depends on case", s)
		}
		if allowed {
			for _, c := range s {
				if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-._:[]", c)) {
					t.Fatalf("HostAllowed(%q) admits character %q", s, c)
				}
			}
		}
		if !strings.ContainsAny(s, "/?#@\\") {
			for _, scheme := range []string{"http://", "HTTPS://"} {
				if got := g.OriginAllowed(scheme + s); got != allowed {
					t.Fatalf("OriginAllowed(%q) = %v but HostAllowed(%q) = %v", scheme+s, got, s, allowed)
				}
			}
		}
		if g.OriginAllowed(s) {
			l := strings.ToLower(s)
			if !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") {
				t.Fatalf("OriginAllowed(%q) without http(s) scheme", s)
			}
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
