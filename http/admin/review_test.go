package admin

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"peerdns/http/ws"
	"peerdns/messages"
)

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
