package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/domain"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

type domainEntry struct {
	Domain          string                   `json:"domain"`
	Hash            string                   `json:"hash"`
	IsLocal         bool                     `json:"isLocal"`
	IsOwner         bool                     `json:"isOwner"`
	ConsensusState  *messages.ConsensusState `json:"consensusState"`
	ConsensusStatus string                   `json:"consensusStatus"`
	Services        []messages.Service       `json:"services"`
}

func TestDomainLifecycle(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()

	addDomain(t, base, "Example.P2P", hashA)

	var ds []domainEntry
	mustJSON(t, "GET", base+"/api/resolved-domains", "", 200, &ds)
	if len(ds) != 3 || ds[0].Domain != "admin.p2p" || ds[0].Hash != "internal" || ds[0].ConsensusStatus != "internal" || ds[0].ConsensusState != nil ||
		ds[1].Domain != "profile.p2p" || ds[1].Hash != "internal" {
		t.Fatalf("internal entries = %+v", ds)
	}
	e := ds[2]
	if e.Domain != "example.p2p" || e.Hash != hashA || !e.IsLocal || !e.IsOwner || e.ConsensusStatus != "resolved" || e.Services == nil {
		t.Fatalf("domain entry = %+v", e)
	}
	cs := e.ConsensusState
	if cs.Status != "resolved" || *cs.Hash != hashA || *cs.ResolvedClaimant != n.id.ID() || cs.ActivePeers != 1 ||
		cs.MinVotes != 1 || cs.TotalVotes != 1 || !cs.QuorumMet || cs.LastResolution == nil || cs.VoteCounts[n.id.ID()] != 1 {
		t.Fatalf("consensus state = %+v", cs)
	}

	var one messages.ConsensusState
	mustJSON(t, "GET", base+"/api/consensus/example.p2p", "", 200, &one)
	if one.Status != "resolved" || *one.Hash != hashA {
		t.Fatalf("consensus/example.p2p = %+v", one)
	}
	var none messages.ConsensusState
	mustJSON(t, "GET", base+"/api/consensus/unknown.p2p", "", 200, &none)
	if none.Status != "no_claims" || none.Hash != nil || none.LastResolution != nil {
		t.Fatalf("consensus/unknown.p2p = %+v", none)
	}

	var entries []messages.LedgerEntry
	mustJSON(t, "GET", base+"/api/entries", "", 200, &entries)
	claimKey := "claim:example.p2p:" + n.id.ID()
	voteKey := "vote:example.p2p:" + n.id.ID() + ":" + n.id.ID()
	if len(entries) != 2 || entries[0] != (messages.LedgerEntry{Key: claimKey, Value: hashA}) || entries[1].Key != voteKey {
		t.Fatalf("entries = %+v", entries)
	}

	// Two ops: the network's genesis, and the claim with our own vote in
	// it (a first claim's auto-vote is known when it is signed).
	var side messages.SidecarStatus
	mustJSON(t, "GET", base+"/api/consensus/status", "", 200, &side)
	if !side.Open || !side.Ready || !side.Writable || !side.BootstrapComplete || side.Length != 2 || side.IndexedLength != 2 || side.DomainCount != 1 || side.Key == nil || len(*side.Key) != 64 || side.LastApplyAt == nil {
		t.Fatalf("sidecar = %+v", side)
	}
	var met messages.ConsensusMetrics
	mustJSON(t, "GET", base+"/api/consensus/metrics", "", 200, &met)
	if met.Resolutions != 1 || met.QuorumFailures != 0 || met.TotalVotes != 1 || met.AvgVotesPerDomain != 1 || !met.BootstrapComplete ||
		len(met.DomainResolutions) != 1 || met.DomainResolutions[0] != (messages.DomainResolutionCount{Domain: "example.p2p", Resolved: 1}) {
		t.Fatalf("metrics = %+v", met)
	}

	var rec struct {
		Success bool   `json:"success"`
		Message string `json:"message"`
	}
	mustJSON(t, "POST", base+"/api/consensus/recalculate", "", 200, &rec)
	if !rec.Success || !strings.Contains(rec.Message, "1 domain") {
		t.Fatalf("recalculate = %+v", rec)
	}
	mustJSON(t, "POST", base+"/api/consensus/recalculate/example.p2p", "", 200, &rec)
	if !rec.Success {
		t.Fatalf("recalculate/example.p2p = %+v", rec)
	}
	mustJSON(t, "GET", base+"/api/consensus/metrics", "", 200, &met)
	if met.Resolutions != 3 {
		t.Fatalf("resolutions after two recalculations = %d, want 3", met.Resolutions)
	}

	var ifs []messages.Interface
	mustJSON(t, "GET", base+"/api/interfaces", "", 200, &ifs)
	if len(ifs) != 1 || ifs[0] != (messages.Interface{Domain: "example.p2p", IP: "127.77.0.2"}) {
		t.Fatalf("interfaces = %+v", ifs)
	}
	var conflicts struct{ Conflicts []messages.P2PConflict }
	mustJSON(t, "GET", base+"/api/p2p-domain-conflicts", "", 200, &conflicts)
	if conflicts.Conflicts == nil || len(conflicts.Conflicts) != 0 {
		t.Fatalf("conflicts = %+v", conflicts)
	}
	var st map[string]any
	mustJSON(t, "GET", base+"/api/status", "", 200, &st)
	if st["isMaster"] != true || st["isConnected"] != false || st["peersCount"] != float64(0) {
		t.Fatalf("status = %v", st)
	}
	var peers []string
	mustJSON(t, "GET", base+"/api/peers", "", 200, &peers)
	if peers == nil || len(peers) != 0 {
		t.Fatalf("peers = %v", peers)
	}

	// Re-claiming updates the hash and keeps the claim.
	addDomain(t, base, "example.p2p", hashB)
	mustJSON(t, "GET", base+"/api/consensus/example.p2p", "", 200, &one)
	if *one.Hash != hashB {
		t.Fatalf("hash after re-claim = %v", *one.Hash)
	}

	// Remove: the resolved claimant's removal leaves nothing behind.
	if code, body := call(t, "POST", base+"/api/remove-domain", `{"domain":"example.p2p"}`); code != 200 || body != "OK" {
		t.Fatalf("remove-domain = %d %q", code, body)
	}
	mustJSON(t, "GET", base+"/api/resolved-domains", "", 200, &ds)
	if len(ds) != 2 { // the admin and profile domains
		t.Fatalf("domains after remove = %+v", ds)
	}
	mustJSON(t, "GET", base+"/api/entries", "", 200, &entries)
	if len(entries) != 0 {
		t.Fatalf("entries after remove = %+v", entries)
	}
	if code, _ := call(t, "POST", base+"/api/remove-domain", `{"domain":"example.p2p"}`); code != 403 {
		t.Fatalf("second remove = %d, want 403", code)
	}
	// The IP stays until cleanup-interfaces releases it.
	mustJSON(t, "GET", base+"/api/interfaces", "", 200, &ifs)
	if len(ifs) != 1 {
		t.Fatalf("interfaces before cleanup = %+v", ifs)
	}
	if code, body := call(t, "POST", base+"/api/cleanup-interfaces", ""); code != 200 || body != "OK" {
		t.Fatalf("cleanup-interfaces = %d %q", code, body)
	}
	mustJSON(t, "GET", base+"/api/interfaces", "", 200, &ifs)
	if len(ifs) != 0 {
		t.Fatalf("interfaces after cleanup = %+v", ifs)
	}
}

func TestHashPreferenceAndSubnets(t *testing.T) {
	dir := t.TempDir()
	n := newTestNode(t, dir)
	base := "http://" + n.AdminAddr()
	if code, body := call(t, "POST", base+"/api/update-hash-preference", `{"domain":"x.p2p","preference":"local"}`); code != 200 || body != "OK" {
		t.Fatalf("update-hash-preference = %d %q", code, body)
	}
	var subs struct{ Subnets []messages.Subnet }
	mustJSON(t, "GET", base+"/api/subnets", "", 200, &subs)
	if len(subs.Subnets) != 1 || subs.Subnets[0].Base != "127.77.0.0" || subs.Subnets[0].CIDR != 16 || subs.Subnets[0].Name != "Subnet 1" {
		t.Fatalf("default subnets = %+v", subs)
	}
	var saved struct {
		Message         string `json:"message"`
		RestartRequired bool   `json:"restartRequired"`
	}
	mustJSON(t, "POST", base+"/api/subnets", `{"subnets":[{"base":"127.90.0.0","cidr":24,"startIndex":10},{"base":"127.91.0.0","cidr":24,"startIndex":1,"name":"extra"}]}`, 200, &saved)
	if !saved.RestartRequired || saved.Message == "" {
		t.Fatalf("POST subnets = %+v", saved)
	}
	mustJSON(t, "GET", base+"/api/subnets", "", 200, &subs)
	if len(subs.Subnets) != 2 || subs.Subnets[0].Name != "Subnet 1" || subs.Subnets[1].Name != "extra" || subs.Subnets[0].Available != 245 || subs.Subnets[1].Index != 1 {
		t.Fatalf("subnets after POST = %+v", subs)
	}
	n.Stop()

	// After a restart the new subnets allocate, and the preference stayed.
	n2 := newTestNode(t, dir)
	base = "http://" + n2.AdminAddr()
	addDomain(t, base, "new.p2p", hashA)
	var ifs []messages.Interface
	mustJSON(t, "GET", base+"/api/interfaces", "", 200, &ifs)
	if len(ifs) != 1 || ifs[0].IP != "127.90.0.10" {
		t.Fatalf("interfaces from new subnet = %+v", ifs)
	}
	got, err := n2.nodeDB.Get("hashpref:x.p2p")
	if err != nil || got != "local" {
		t.Fatalf("persisted preference = %q, %v", got, err)
	}
}

func TestBadInput(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	tests := []struct {
		name, method, path, body string
		want                     int
		msg                      string // substring of the body
	}{
		{"add: empty body", "POST", "/api/add-domain", "", 500, "body is empty"},
		{"add: malformed JSON", "POST", "/api/add-domain", `{"domain":`, 500, "invalid JSON"},
		{"add: wrong type", "POST", "/api/add-domain", `{"domain":5,"hash":"` + hashA + `"}`, 500, `"domain"`},
		{"add: missing hash", "POST", "/api/add-domain", `{"domain":"a.p2p"}`, 500, "required"},
		{"add: bad hash", "POST", "/api/add-domain", `{"domain":"a.p2p","hash":"hs://xyz"}`, 500, "64 hex"},
		{"add: no hs prefix", "POST", "/api/add-domain", `{"domain":"a.p2p","hash":"` + strings.Repeat("a", 64) + `"}`, 500, "hs://"},
		{"add: invalid domain", "POST", "/api/add-domain", `{"domain":"bad_name!.p2p","hash":"` + hashA + `"}`, 500, "contains"},
		{"add: non-ASCII names its character", "POST", "/api/add-domain", `{"domain":"caf\u00e9.p2p","hash":"` + hashA + `"}`, 500, `contains 'é'`},
		{"add: colon in domain", "POST", "/api/add-domain", `{"domain":"a:b.p2p","hash":"` + hashA + `"}`, 500, "contains"},
		{"add: too long", "POST", "/api/add-domain", `{"domain":"` + strings.Repeat("a.", 130) + `p2p","hash":"` + hashA + `"}`, 500, "longer than 253"},
		{"add: internal domain", "POST", "/api/add-domain", `{"domain":"admin.p2p","hash":"` + hashA + `"}`, 500, "internal"},
		{"remove: malformed", "POST", "/api/remove-domain", `[`, 500, "invalid JSON"},
		{"remove: missing domain", "POST", "/api/remove-domain", `{}`, 500, "required"},
		{"remove: not claimed", "POST", "/api/remove-domain", `{"domain":"nobody.p2p"}`, 403, "no claim"},
		{"remove: invalid name", "POST", "/api/remove-domain", `{"domain":"!!"}`, 403, "no claim"},
		{"pref: invalid", "POST", "/api/update-hash-preference", `{"domain":"a.p2p","preference":"mine"}`, 400, "preference"},
		{"pref: malformed", "POST", "/api/update-hash-preference", `{`, 400, "invalid JSON"},
		{"pref: bad domain", "POST", "/api/update-hash-preference", `{"domain":"","preference":"local"}`, 500, "required"},
		{"clear-dns-cache: invalid domain", "POST", "/api/clear-dns-cache", `{"domain":"a b"}`, 500, `invalid request: domain "a b"`},
		{"version pref: invalid domain", "POST", "/api/update-version-preference", `{"domain":"a b","version":"p2p"}`, 500, `invalid request: domain "a b"`},
		{"consensus: invalid domain", "GET", "/api/consensus/bad%20name", "", 500, "contains"},
		{"consensus: internal", "GET", "/api/consensus/admin.p2p", "", 500, "internal"},
		{"recalc: unknown domain", "POST", "/api/consensus/recalculate/none.p2p", "", 500, "no claims"},
		{"subnets: malformed", "POST", "/api/subnets", `{"subnets":`, 400, "errors"},
		{"subnets: missing", "POST", "/api/subnets", `{}`, 400, "subnets is required"},
		{"subnets: bad base", "POST", "/api/subnets", `{"subnets":[{"base":"1.2.3","cidr":24,"startIndex":1}]}`, 400, "not a valid IPv4"},
		{"subnets: bad cidr", "POST", "/api/subnets", `{"subnets":[{"base":"10.0.0.0","cidr":40,"startIndex":1}]}`, 400, "between 1 and 32"},
		{"subnets: bad start", "POST", "/api/subnets", `{"subnets":[{"base":"10.0.0.0","cidr":24,"startIndex":300}]}`, 400, "between 1 and 254"},
		{"subnets: overlap", "POST", "/api/subnets", `{"subnets":[{"base":"10.0.0.0","cidr":8,"startIndex":1},{"base":"10.1.0.0","cidr":16,"startIndex":1}]}`, 400, "overlaps"},
		{"logs: unknown channel", "GET", "/api/logs/nope", "", 404, "unknown log channel"},
		{"logs: traversal", "GET", "/api/logs/..%2F..%2Fidentity.key", "", 404, "unknown log channel"},
		{"logs: bad lines", "GET", "/api/logs/core?lines=abc", "", 400, "positive integer"},
		{"logs: zero lines", "GET", "/api/logs/core?lines=0", "", 400, "positive integer"},
		{"health: bad probe", "GET", "/api/health?probe=x", "", 400, "probe"},
		{"favicon", "GET", "/favicon.ico", "", 404, "Not Found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := call(t, tt.method, base+tt.path, tt.body)
			if code != tt.want || !strings.Contains(body, tt.msg) {
				t.Fatalf("%s %s = %d %q, want %d containing %q", tt.method, tt.path, code, body, tt.want, tt.msg)
			}
		})
	}
	// Subnet errors are JSON with error and errors.
	code, body := call(t, "POST", base+"/api/subnets", `{"subnets":[{"base":"x","cidr":1,"startIndex":1}]}`)
	var se struct {
		Error  string   `json:"error"`
		Errors []string `json:"errors"`
	}
	if code != 400 || json.Unmarshal([]byte(body), &se) != nil || se.Error == "" || len(se.Errors) != 1 {
		t.Fatalf("subnet error body = %d %q", code, body)
	}
	// Nothing half-written: the ledger holds only the genesis op.
	// Two ops: the network's genesis, and the claim with our own vote in
	// it (a first claim's auto-vote is known when it is signed).
	var side messages.SidecarStatus
	mustJSON(t, "GET", base+"/api/consensus/status", "", 200, &side)
	if side.Length != 1 {
		t.Fatalf("ledger length after bad input = %d, want 1", side.Length)
	}
}

func TestNavigationAndLogs(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	for _, tab := range []string{"domains", "host", "local-dns", "entries", "peers", "certs", "interfaces", "logs", "settings"} {
		req, _ := newNoRedirect()
		resp, err := req.Get(base + "/" + tab)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 302 || resp.Header.Get("Location") != "/#"+tab {
			t.Fatalf("GET /%s = %d Location %q", tab, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	var logs struct {
		Channels []struct{ ID, Label, File string }
	}
	mustJSON(t, "GET", base+"/api/logs", "", 200, &logs)
	if len(logs.Channels) != 6 || logs.Channels[0].ID != "core" || logs.Channels[0].File != "core.log" {
		t.Fatalf("logs = %+v", logs)
	}
	addDomain(t, base, "logged.p2p", hashA)
	testutil.Eventually(t, 5*time.Second, func() error {
		var tail struct {
			Channel string
			Lines   []string
		}
		mustJSON(t, "GET", base+"/api/logs/core?lines=2", "", 200, &tail)
		if tail.Channel != "core" || len(tail.Lines) != 2 || !strings.Contains(strings.Join(tail.Lines, "\n"), "logged.p2p") {
			return fmt.Errorf("tail = %+v", tail)
		}
		return nil
	})
	var empty struct{ Lines []string }
	mustJSON(t, "GET", base+"/api/logs/tunnel?lines=99999", "", 200, &empty)
	if empty.Lines == nil || len(empty.Lines) != 0 {
		t.Fatalf("empty channel tail = %+v", empty)
	}
}

func TestHealth(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	var h struct {
		Status       string
		Timestamp    string
		Uptime       int
		Probe        string
		Services     map[string]map[string]bool
		Dependencies map[string]map[string]bool
	}
	mustJSON(t, "GET", base+"/api/health", "", 200, &h)
	if h.Status != "healthy" || h.Probe != "liveness" || !h.Dependencies["dataStore"]["healthy"] || h.Timestamp == "" {
		t.Fatalf("liveness = %+v", h)
	}
	if _, ok := h.Services["dns"]["initialized"]; !ok {
		t.Fatalf("dns service fields = %+v", h.Services)
	}
	if _, err := time.Parse(time.RFC3339Nano, h.Timestamp); err != nil {
		t.Fatalf("timestamp %q: %v", h.Timestamp, err)
	}
	// Readiness: once the ledger bootstrapped and DNS and the peer endpoint
	// are up, every enabled service reports healthy.
	testutil.Eventually(t, 10*time.Second, func() error {
		code, body := call(t, "GET", base+"/api/health?probe=readiness", "")
		if err := json.Unmarshal([]byte(body), &h); err != nil {
			return err
		}
		if code != 200 || h.Status != "healthy" || h.Probe != "readiness" {
			return fmt.Errorf("readiness = %d %s", code, body)
		}
		return nil
	})
	dns := h.Services["dns"]
	if !dns["enabled"] || !dns["healthy"] || !dns["initialized"] || !h.Services["swarm"]["healthy"] || !h.Dependencies["peerNetwork"]["healthy"] {
		t.Fatalf("readiness services = %+v deps = %+v", h.Services, h.Dependencies)
	}
	if p := h.Services["proxy"]; !p["enabled"] || !p["healthy"] {
		t.Fatalf("proxy = %+v, want enabled and healthy", p)
	}
	// A DNS server that stops serving makes the node not ready.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.dns.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	code, body := call(t, "GET", base+"/api/health?probe=readiness", "")
	if code != 503 || !strings.Contains(body, `"not_ready"`) {
		t.Fatalf("readiness with DNS down = %d %s", code, body)
	}
}

func TestSupervisionRestartsCrashedDomainActor(t *testing.T) {
	// The domain actor of crash.p2p panics on the first evaluation after
	// the test arms it; the supervisor must restart it and the node keep
	// answering.
	var armed atomic.Bool
	crash := func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if ev, ok := env.Message.(*domain.Evaluate); ok && ev.Domain == "crash.p2p" && armed.CompareAndSwap(true, false) {
				panic("domain crash.p2p: crash requested by the test")
			}
			next(c, env)
		}
	}
	cfg := testConfig(t.TempDir())
	cfg.domainMiddleware = []actor.ReceiverMiddleware{crash}
	n, err := Start(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	base := "http://" + n.AdminAddr()
	addDomain(t, base, "crash.p2p", hashA)
	armed.Store(true)
	if code, body := call(t, "POST", base+"/api/consensus/recalculate/crash.p2p", ""); code != 200 {
		t.Logf("recalculate during the crash = %d %q", code, body)
	}
	if armed.Load() {
		t.Fatal("the domain actor never evaluated after the test armed the crash")
	}
	// The node keeps answering, and the restarted domain actor evaluates
	// again: a recalculation settles only if it answers.
	var ds []domainEntry
	mustJSON(t, "GET", base+"/api/resolved-domains", "", 200, &ds)
	found := false
	for _, d := range ds {
		found = found || d.Domain == "crash.p2p"
	}
	if !found {
		t.Fatalf("crash.p2p missing from resolved-domains after the crash: %+v", ds)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		code, body := call(t, "POST", base+"/api/consensus/recalculate/crash.p2p", "")
		if code != 200 {
			return fmt.Errorf("recalculate = %d %q", code, body)
		}
		return nil
	})
	addDomain(t, base, "crash.p2p", hashB)
	var cs messages.ConsensusState
	mustJSON(t, "GET", base+"/api/consensus/crash.p2p", "", 200, &cs)
	if cs.Status != "resolved" || *cs.Hash != hashB {
		t.Fatalf("after restart consensus = %+v", cs)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		_, body := call(t, "GET", base+"/api/logs/core?lines=50", "")
		if !strings.Contains(body, "actor failed") || !strings.Contains(body, "crash requested by the test") {
			return fmt.Errorf("no failure logged in core: %s", body)
		}
		return nil
	})
}
