package admin

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	peernet "peerdns/actors/peer"
	"peerdns/actors/peer/peertest"
	"peerdns/internal/testutil"
	"peerdns/transport"
)

// peersTestNode is a real node's peer side: ledger, QUIC endpoint, peers
// supervisor, and the admin routes of peers.go on a loopback listener.
type peersTestNode struct {
	url   string
	sys   *actor.ActorSystem
	peers *actor.PID
	ep    *transport.QUICEndpoint
}

func newPeersTestNode(t *testing.T, join string) *peersTestNode {
	t.Helper()
	p := peertest.Start(t, join, func(d *peernet.Deps) {
		d.TickInterval, d.SyncInterval = 20*time.Millisecond, 200*time.Millisecond
	})
	sys, ppid := p.Sys, p.Peers
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := router.New()
	RegisterPeers(r, quiet, sys.Root, ppid)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: r.Handler}
	go srv.Serve(ln)
	// Cleanups run last-in first-out: the server stops before the node.
	t.Cleanup(func() { _ = srv.Shutdown() })
	return &peersTestNode{url: "http://" + ln.Addr().String(), sys: sys, peers: ppid, ep: p.Endpoint}
}

func peersDo(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(url)
	if body != "" {
		req.SetBodyString(body)
		req.Header.SetContentType("application/json")
	}
	if err := fasthttp.DoTimeout(req, resp, 10*time.Second); err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...)
}

func TestPeersInviteAndDiagnostics(t *testing.T) {
	master := newPeersTestNode(t, "")
	var code int
	var body []byte
	testutil.Eventually(t, 10*time.Second, func() error {
		code, body = peersDo(t, "POST", master.url+"/api/invites", "")
		if code != 200 {
			return errors.New(string(body))
		}
		return nil
	})
	var inv struct {
		Invite    string `json:"invite"`
		ExpiresAt int64  `json:"expiresAt"`
	}
	if err := json.Unmarshal(body, &inv); err != nil || inv.Invite == "" {
		t.Fatalf("POST /api/invites = %s (%v)", body, err)
	}
	if d := time.Until(time.UnixMilli(inv.ExpiresAt)); d < 23*time.Hour || d > 24*time.Hour {
		t.Fatalf("default expiry in %v, want 24h", d)
	}
	parsed, err := transport.ParseInvite(inv.Invite)
	if err != nil {
		t.Fatalf("invite does not parse: %v", err)
	}
	if len(parsed.Addrs) == 0 || parsed.Addrs[0] != master.ep.Addr().String() {
		t.Fatalf("invite addrs = %v, want %s", parsed.Addrs, master.ep.Addr())
	}

	code, body = peersDo(t, "POST", master.url+"/api/invites", `{"ttlSeconds": 60}`)
	if code != 200 {
		t.Fatalf("ttl 60: %d %s", code, body)
	}
	json.Unmarshal(body, &inv)
	if d := time.Until(time.UnixMilli(inv.ExpiresAt)); d > time.Minute || d < 50*time.Second {
		t.Fatalf("ttlSeconds 60 expires in %v", d)
	}
	for _, bad := range []struct{ name, body string }{
		{"not json", "{"},
		{"wrong type", `{"ttlSeconds":"soon"}`},
		{"zero", `{"ttlSeconds":0}`},
		{"negative", `{"ttlSeconds":-5}`},
		{"too long", `{"ttlSeconds":99999999}`},
	} {
		t.Run(bad.name, func(t *testing.T) {
			code, body := peersDo(t, "POST", master.url+"/api/invites", bad.body)
			if code != 400 || len(body) == 0 {
				t.Fatalf("POST /api/invites %s = %d %q, want 400 with a message", bad.body, code, body)
			}
		})
	}

	// A joiner redeems the first invite; diagnostics show the real state.
	// (The second invite, with ttl 60, is left unused.)
	firstInvite := parsed
	enc, _ := firstInvite.Encode()
	newPeersTestNode(t, enc)
	testutil.Eventually(t, 15*time.Second, func() error {
		code, body = peersDo(t, "GET", master.url+"/api/diagnostics/invites", "")
		if code != 200 {
			return errors.New(string(body))
		}
		if !strings.Contains(string(body), `"state":"connected"`) {
			return errors.New("no connected peer yet: " + string(body))
		}
		return nil
	})
	var dg struct {
		Summary struct {
			ConnectedPeers  int  `json:"connectedPeers"`
			InvitesCreated  int  `json:"invitesCreated"`
			InvitesRedeemed int  `json:"invitesRedeemed"`
			IsMaster        bool `json:"isMaster"`
		} `json:"summary"`
		Peers            []map[string]any `json:"peers"`
		Recommendations  []string         `json:"recommendations"`
		ConnectionIssues []map[string]any `json:"connectionIssues"`
	}
	if err := json.Unmarshal(body, &dg); err != nil {
		t.Fatal(err)
	}
	if dg.Summary.ConnectedPeers != 1 || dg.Summary.InvitesCreated != 2 || dg.Summary.InvitesRedeemed != 1 || !dg.Summary.IsMaster {
		t.Fatalf("summary = %+v", dg.Summary)
	}
	if len(dg.Peers) != 1 || len(dg.Recommendations) == 0 || dg.ConnectionIssues == nil {
		t.Fatalf("diagnostics = %s", body)
	}
	// The peer runs on QUIC: its connection's own counters are there,
	// with the handshake's and the session's packets counted.
	q, _ := dg.Peers[0]["quic"].(map[string]any)
	sent, _ := q["packetsSent"].(float64)
	got, _ := q["packetsReceived"].(float64)
	cwnd, _ := q["congestionWindow"].(float64)
	if _, hasLost := q["packetsLost"].(float64); sent == 0 || got == 0 || cwnd == 0 || !hasLost {
		t.Fatalf("peer's quic counters = %v", dg.Peers[0]["quic"])
	}
}

func TestPeersDiagnosticsInitialising(t *testing.T) {
	// A node whose join invite is unusable never finishes initialising.
	n := newPeersTestNode(t, "garbage-invite")
	code, body := peersDo(t, "GET", n.url+"/api/diagnostics/invites", "")
	if code != 503 || !strings.Contains(string(body), "initialising") {
		t.Fatalf("GET /api/diagnostics/invites = %d %q, want 503", code, body)
	}
	code, body = peersDo(t, "POST", n.url+"/api/invites", "")
	if code != 503 {
		t.Fatalf("POST /api/invites while not in a network = %d %q, want 503", code, body)
	}
	src := PeersSource(n.sys.Root, n.peers)
	if ids, err := src.Peers(); err != nil || len(ids) != 0 || ids == nil {
		t.Fatalf("Peers() = %v, %v", ids, err)
	}
	if src.Healthy() {
		t.Fatal("Healthy() while initialising")
	}
}
