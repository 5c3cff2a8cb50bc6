package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/router"
	"github.com/fasthttp/websocket"

	"peerdns/actors/peer/peertest"
	"peerdns/http/ws"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

// serveAdmin serves an admin Server built from d on a loopback listener
// and returns its address.
func serveAdmin(t *testing.T, d Deps) string {
	t.Helper()
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	return serveServer(t, New(d))
}

// serveServer serves s on a loopback listener and returns its address.
func serveServer(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Shutdown(); <-done })
	return ln.Addr().String()
}

// newGuardedNode is the admin API of a real ledger and peer network (the
// domain, consensus, invite routes and /ws) on loopback.
func newGuardedNode(t *testing.T) (addr string) {
	t.Helper()
	p := peertest.Start(t, "", nil)
	quiet := slog.New(slog.DiscardHandler)
	hub := p.Sys.Root.Spawn(ws.Props(quiet, nil))
	t.Cleanup(func() { _ = p.Sys.Root.StopFuture(hub).Wait() })
	addr = serveAdmin(t, Deps{
		Root: p.Sys.Root, Ledger: p.Ledger, Self: p.ID.ID(), Started: time.Now(),
		Peers:        PeersSource(p.Sys.Root, p.Peers),
		WS:           ws.Handler(ws.Deps{Root: p.Sys.Root, Hub: hub, Ledger: p.Ledger}),
		Register:     []func(*router.Router){func(r *router.Router) { RegisterPeers(r, quiet, p.Sys.Root, p.Peers) }},
		AllowedHosts: []string{"panel.lan"},
	})
	// The ledger answers once it has bootstrapped its network.
	testutil.Eventually(t, 10*time.Second, func() error {
		if code, body := testutil.Call(t, "POST", "http://"+addr+"/api/invites", ""); code != 200 {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	return addr
}

// do sends one request as a browser page or a script would: host "" is
// the address itself; hdr may carry Origin, Sec-Fetch-Site, Content-Type.
func do(t *testing.T, addr, method, path, host, body string, hdr map[string]string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := testutil.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func resolvedDomains(t *testing.T, addr string) string {
	t.Helper()
	var ds []messages.DomainEntry
	testutil.MustJSON(t, "GET", "http://"+addr+"/api/resolved-domains", "", 200, &ds)
	var names []string
	for _, d := range ds {
		names = append(names, d.Domain)
	}
	return strings.Join(names, ",")
}

// The attacks of issue "local APIs a web page cannot drive", as a page
// would send them, are refused and change nothing; the same requests from
// curl or the panel itself work.
func TestGuardRefusesWebPages(t *testing.T) {
	addr := newGuardedNode(t)
	hash := testutil.Hash('a')
	add := `{"domain":"evil.p2p","hash":"` + hash + `"}`
	evil := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	refused := []struct {
		name, method, path, host, body string
		hdr                            map[string]string
		want                           int
		msg                            string
	}{
		{"cross-origin text/plain form POST", "POST", "/api/add-domain", "", add, with(evil, "Content-Type", "text/plain"), 403, "https://evil.example"},
		{"form POST, Origin stripped", "POST", "/api/add-domain", "", add, map[string]string{"Content-Type": "text/plain"}, 415, "application/json"},
		{"urlencoded form POST, Origin stripped", "POST", "/api/add-domain", "", "domain=evil.p2p", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "application/json"},
		{"bodyless cross-site recalculate", "POST", "/api/consensus/recalculate", "", "", evil, 403, "evil.example"},
		{"bodyless recalculate, only Sec-Fetch-Site", "POST", "/api/consensus/recalculate", "", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "cross-site"},
		{"text/plain on a bodyless endpoint", "POST", "/api/consensus/recalculate", "", "x", map[string]string{"Content-Type": "text/plain"}, 415, "application/json"},
		{"rebinding Host reads an invite", "POST", "/api/invites", "evil.example", "", nil, 421, `"evil.example"`},
		{"rebinding Host on our port", "GET", "/api/resolved-domains", "evil.example:7710", "", nil, 421, `"evil.example:7710"`},
		{"null Origin", "POST", "/api/add-domain", "", add, map[string]string{"Origin": "null", "Content-Type": "application/json"}, 403, `"null"`},
		{"foreign Origin, JSON", "POST", "/api/add-domain", "", add, map[string]string{"Origin": "http://evil.example", "Content-Type": "application/json"}, 403, "evil.example"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(t, addr, tt.method, tt.path, tt.host, tt.body, tt.hdr)
			if code != tt.want || !strings.Contains(body, tt.msg) {
				t.Fatalf("%s %s = %d %q, want %d containing %q", tt.method, tt.path, code, body, tt.want, tt.msg)
			}
		})
	}
	if got := resolvedDomains(t, addr); strings.Contains(got, "evil.p2p") {
		t.Fatalf("refused requests added a domain: %s", got)
	}
	var side messages.SidecarStatus
	testutil.MustJSON(t, "GET", "http://"+addr+"/api/consensus/status", "", 200, &side)
	if side.Length != 1 {
		t.Fatalf("ledger length %d after refused requests, want 1 (genesis only)", side.Length)
	}

	// curl, scripts, the CLI: no Origin, JSON bodies, bodyless POSTs.
	self := "http://" + addr
	allowed := []struct {
		name, method, path, host, body string
		hdr                            map[string]string
	}{
		{"curl --json add-domain", "POST", "/api/add-domain", "", `{"domain":"curl.p2p","hash":"` + hash + `"}`, map[string]string{"Content-Type": "application/json"}},
		{"bodyless recalculate", "POST", "/api/consensus/recalculate", "", "", nil},
		{"localhost Host", "GET", "/api/resolved-domains", "localhost:" + strings.Split(addr, ":")[1], "", nil},
		{"admin domain Host", "GET", "/api/resolved-domains", "admin.p2p", "", nil},
		{"configured extra Host", "GET", "/api/resolved-domains", "panel.lan:8080", "", nil},
		{"the panel itself", "POST", "/api/add-domain", "", `{"domain":"panel.p2p","hash":"` + hash + `"}`,
			map[string]string{"Origin": self, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json; charset=utf-8"}},
	}
	for _, tt := range allowed {
		t.Run(tt.name, func(t *testing.T) {
			if code, body := do(t, addr, tt.method, tt.path, tt.host, tt.body, tt.hdr); code != 200 {
				t.Fatalf("%s %s = %d %q, want 200", tt.method, tt.path, code, body)
			}
		})
	}
	if got := resolvedDomains(t, addr); !strings.Contains(got, "curl.p2p") || !strings.Contains(got, "panel.p2p") {
		t.Fatalf("resolved domains = %s, want curl.p2p and panel.p2p", got)
	}
}

func TestGuardWebSocket(t *testing.T) {
	addr := newGuardedNode(t)
	dial := func(origin string) (int, error) {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		c, resp, err := (&websocket.Dialer{HandshakeTimeout: 5 * time.Second}).Dial("ws://"+addr+"/ws", h)
		if err != nil {
			if resp != nil {
				return resp.StatusCode, err
			}
			return 0, err
		}
		defer c.Close()
		// The connection serves: ask for the domain list.
		if err := c.WriteJSON(map[string]string{"type": "request-domains"}); err != nil {
			return 0, err
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var m struct{ Type string }
		if err := c.ReadJSON(&m); err != nil || m.Type != "domains-list" {
			return 0, fmt.Errorf("reply %q, %v", m.Type, err)
		}
		return resp.StatusCode, nil
	}
	// Browsers send no Sec-Fetch-Site on a WebSocket handshake, so the
	// Origin alone must tell another site: another loopback IP (a p2p
	// domain's service is served on its own 127.77.x.y by a remote peer)
	// or localhost against 127.0.0.1, or another port, are other sites.
	for _, origin := range []string{"https://evil.example", "http://127.77.0.5:8080", "http://localhost:9", "http://127.0.0.1:9"} {
		if code, err := dial(origin); code != 403 {
			t.Fatalf("WebSocket with Origin %q = %d %v, want 403", origin, code, err)
		}
	}
	for _, origin := range []string{"", "http://" + addr} {
		if code, err := dial(origin); err != nil || code != 101 {
			t.Fatalf("WebSocket with Origin %q = %d %v, want 101", origin, code, err)
		}
	}
}

// The admin API answers JSON with a final newline, the cached domain
// listing included.
func TestJSONAnswersEndWithNewline(t *testing.T) {
	addr := newGuardedNode(t)
	for _, path := range []string{"/api/resolved-domains", "/api/entries", "/api/consensus/status", "/api/logs"} {
		code, body := do(t, addr, "GET", path, "", "", nil)
		if code != 200 || !strings.HasSuffix(body, "}\n") && !strings.HasSuffix(body, "]\n") {
			t.Errorf("GET %s = %d %q, want JSON ending in a newline", path, code, body)
		}
		if !json.Valid([]byte(body)) {
			t.Errorf("GET %s: invalid JSON %q", path, body)
		}
	}
}

// The admin domain is answered in DNS with the admin address (a loopback
// IP by default), so http://admin.p2p:3000 is whatever other local
// program listens on port 3000, as http://127.0.0.1:3000 is. A page
// there is another site: its bodyless POSTs (no preflight) and its
// WebSocket (no CORS at all) are refused, as they are from
// 127.0.0.1:3000. The panel's own origin on the admin domain still works.
func TestAdminDomainOtherPortIsAnotherSite(t *testing.T) {
	sys, quiet := quietSystem(t)
	var recalcs atomic.Int32
	ledger := stubLedger(t, sys, 0, func(msg any) any {
		switch msg.(type) {
		case *messages.Recalculate:
			recalcs.Add(1)
			return &messages.RecalculateReply{}
		case *messages.GetDomains:
			return &messages.GetDomainsReply{}
		}
		return nil
	})
	hub := sys.Root.Spawn(ws.Props(quiet, nil))
	t.Cleanup(func() { _ = sys.Root.StopFuture(hub).Wait() })
	addr := serveAdmin(t, Deps{Root: sys.Root, Ledger: ledger, Peers: fakePeers{healthy: true}, Started: time.Now(), Log: quiet,
		WS: ws.Handler(ws.Deps{Root: sys.Root, Hub: hub, Ledger: ledger, Log: quiet})})
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	host := "admin.p2p:" + port
	own, other := "http://"+host, "http://admin.p2p:3000"

	post := func(origin string) (int, string) {
		return do(t, addr, "POST", "/api/consensus/recalculate", host, "", map[string]string{"Origin": origin, "Sec-Fetch-Site": "same-site"})
	}
	dial := func(origin string) int {
		h := http.Header{"Host": {host}, "Origin": {origin}}
		c, resp, err := (&websocket.Dialer{HandshakeTimeout: 5 * time.Second}).Dial("ws://"+addr+"/ws", h)
		if err == nil {
			c.Close()
		}
		if resp == nil {
			t.Fatalf("WebSocket from %s: %v", origin, err)
		}
		return resp.StatusCode
	}

	if code, body := post(other); code != 403 {
		t.Errorf("bodyless POST from a page at %s = %d %q, want 403", other, code, body)
	}
	if n := recalcs.Load(); n != 0 {
		t.Errorf("the ledger recalculated %d times for a refused page", n)
	}
	if code := dial(other); code != 403 {
		t.Errorf("WebSocket from a page at %s = %d, want 403", other, code)
	}

	if code, body := post(own); code != 200 {
		t.Errorf("bodyless POST from the panel at %s = %d %q, want 200", own, code, body)
	}
	if code := dial(own); code != 101 {
		t.Errorf("WebSocket from the panel at %s = %d, want 101", own, code)
	}
}
