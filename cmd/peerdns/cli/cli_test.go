package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"peerdns/cmd/peerdns/node"
	"peerdns/internal/testutil"
)

// startNode starts a whole node in-process on loopback ports and
// returns its admin address.
func startNode(t *testing.T) *node.Node {
	t.Helper()
	n, err := node.Start(node.Config{
		Data: t.TempDir(), AdminAddr: "127.0.0.1:0", DNSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		HTTPSAddr: "127.0.0.1:0", P2PAddr: "127.0.0.1:0", AdminDomain: "admin.p2p", LogLevel: "info",
		Upstream: []string{"127.0.0.1:1"},
	}, io.Discard)
	if err != nil {
		t.Fatalf("node.Start: %v", err)
	}
	t.Cleanup(n.Stop)
	return n
}

// result is one command's outcome.
type result struct {
	code           int
	stdout, stderr string
}

func runCLI(ctx context.Context, addr string, args ...string) result {
	var out, errOut testutil.LogBuffer
	env := func(k string) string {
		if k == "PEERDNS_ADMIN_ADDR" {
			return addr
		}
		return ""
	}
	code := Run(ctx, args[0], args[1:], env, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func cli(t *testing.T, addr string, wantCode int, args ...string) result {
	t.Helper()
	r := runCLI(context.Background(), addr, args...)
	if r.code != wantCode {
		t.Fatalf("peerdns %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, wantCode, r.stdout, r.stderr)
	}
	if wantCode != 0 && strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("peerdns %s: stderr is not one line: %q", strings.Join(args, " "), r.stderr)
	}
	return r
}

func decode(t *testing.T, r result, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, r.stdout)
	}
}

func contains(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s: output lacks %q:\n%s", what, w, got)
		}
	}
}

var hashA = testutil.Hash('a')

// Every command against a real node, as a table and as JSON.
func TestCommandsAgainstNode(t *testing.T) {
	n := startNode(t)
	addr := n.AdminAddr()

	t.Run("status", func(t *testing.T) {
		r := cli(t, addr, 0, "status")
		contains(t, "status", r.stdout, "node ", n.ID(), "role ", "master", "health ", "healthy", "peers connected")
		var st statusOut
		decode(t, cli(t, addr, 0, "status", "--json"), &st)
		if st.Status["isMaster"] != true || st.Health["status"] == nil || !strings.Contains(string(st.Node), n.ID()) {
			t.Errorf("status --json = %+v", st)
		}
	})

	t.Run("domains", func(t *testing.T) {
		r := cli(t, addr, 0, "domains", "add", "cli.p2p", hashA)
		contains(t, "domains add", r.stdout, "added cli.p2p")
		// Flags after the arguments, and the JSON form of a write.
		var done map[string]any
		decode(t, cli(t, addr, 0, "domains", "add", "tls.p2p", testutil.Hash('b'), "--ssl", "--json"), &done)
		if done["ok"] != true || done["name"] != "tls.p2p" {
			t.Errorf("domains add --json = %v", done)
		}
		testutil.Eventually(t, 5*time.Second, func() error {
			r := runCLI(context.Background(), addr, "domains")
			for _, w := range []string{"DOMAIN", "cli.p2p", "resolved", "this node", hashA, "admin.p2p", "internal"} {
				if !strings.Contains(r.stdout, w) {
					return fmt.Errorf("domains lacks %q:\n%s", w, r.stdout)
				}
			}
			return nil
		})
		var list []map[string]any
		decode(t, cli(t, addr, 0, "domains", "--json"), &list)
		found := false
		for _, d := range list {
			found = found || (d["domain"] == "cli.p2p" && d["consensusStatus"] == "resolved" && d["isOwner"] == true)
		}
		if !found {
			t.Errorf("domains --json lacks cli.p2p resolved and owned: %v", list)
		}
		r = cli(t, addr, 0, "domains", "show", "cli.p2p")
		contains(t, "domains show", r.stdout, "consensus", "resolved", hashA, "CLAIMANT", n.ID())
		var shown shownDomain
		decode(t, cli(t, addr, 0, "domains", "show", "cli.p2p", "--json"), &shown)
		if !strings.Contains(string(shown.Consensus), `"resolved"`) || !strings.Contains(string(shown.Entry), "cli.p2p") || shown.Services == nil {
			t.Errorf("domains show --json = %+v", shown)
		}
		r = cli(t, addr, ExitNotFound, "domains", "show", "nobody.p2p")
		contains(t, "domains show unknown", r.stderr, `no domain "nobody.p2p"`)
		cli(t, addr, 0, "domains", "remove", "tls.p2p")
		// Removing it again: the node refuses (403), exit 3 with its reason.
		r = cli(t, addr, ExitRefused, "domains", "remove", "tls.p2p")
		contains(t, "domains remove twice", r.stderr, "403")
		// A claim the node refuses: an internal domain.
		cli(t, addr, ExitRefused, "domains", "add", "admin.p2p", hashA)
	})

	t.Run("records", func(t *testing.T) {
		cli(t, addr, 0, "records", "add", "nas.home", "A", "192.0.2.5", "--ttl", "60")
		cli(t, addr, 0, "records", "add", "nas.home", "MX", "10 mail.home")
		cli(t, addr, 0, "records", "add", "_sip._tcp.home", "SRV", "10", "5", "5060", "sip.home")
		r := cli(t, addr, 0, "records")
		contains(t, "records", r.stdout, "INDEX", "nas.home", "192.0.2.5", "60", "10 mail.home", "10 5 5060 sip.home")
		// The record answers on the node's DNS.
		q := new(dns.Msg)
		q.SetQuestion("nas.home.", dns.TypeA)
		m, _, err := new(dns.Client).Exchange(q, n.DNSAddr())
		if err != nil || len(m.Answer) != 1 || !strings.Contains(m.Answer[0].String(), "192.0.2.5") {
			t.Fatalf("DNS nas.home A after records add: %v %v", m, err)
		}
		var body struct {
			Records []map[string]any `json:"records"`
		}
		decode(t, cli(t, addr, 0, "records", "--json"), &body)
		if len(body.Records) != 3 {
			t.Errorf("records --json: %d records, want 3: %v", len(body.Records), body.Records)
		}
		r = cli(t, addr, 0, "records", "remove", "nas.home", "MX")
		contains(t, "records remove", r.stdout, "removed 1")
		var done map[string]any
		decode(t, cli(t, addr, 0, "records", "remove", "nas.home", "--json"), &done)
		if done["removed"] != float64(1) {
			t.Errorf("records remove --json = %v", done)
		}
		cli(t, addr, ExitNotFound, "records", "remove", "nas.home")
		cli(t, addr, ExitUsage, "records", "add", "x.home", "MX", "mail.home")
		cli(t, addr, ExitUsage, "records", "add", "x.home", "CAA", "0 issue ca.example")
		// The node's own validation: exit 3 with its message.
		cli(t, addr, ExitRefused, "records", "add", "bad.home", "A", "not-an-ip")
	})

	t.Run("tunnels", func(t *testing.T) {
		var created struct {
			ID string `json:"id"`
		}
		if err := newClient(addr, 5*time.Second).post("/api/tunnel-create", map[string]any{"name": "web", "port": 8080}, &created); err != nil {
			t.Fatal(err)
		}
		// A new server starts in the background ("starting", no key yet):
		// poll until it runs.
		testutil.Eventually(t, 10*time.Second, func() error {
			r := runCLI(context.Background(), addr, "tunnels")
			for _, w := range []string{"KIND", "server", created.ID, "running", "web", "8080", "hs://"} {
				if !strings.Contains(r.stdout, w) {
					return fmt.Errorf("tunnels lacks %q:\n%s", w, r.stdout)
				}
			}
			return nil
		})
		var out struct {
			Servers []map[string]any `json:"servers"`
			Clients []map[string]any `json:"clients"`
		}
		decode(t, cli(t, addr, 0, "tunnels", "--json"), &out)
		if len(out.Servers) != 1 || out.Servers[0]["id"] != created.ID || out.Clients == nil {
			t.Errorf("tunnels --json = %+v", out)
		}
	})

	t.Run("peers", func(t *testing.T) {
		// One node alone: the header, and an empty JSON array.
		r := cli(t, addr, 0, "peers")
		contains(t, "peers", r.stdout, "PEER", "STATE", "PATH", "RTT")
		var list []any
		decode(t, cli(t, addr, 0, "peers", "--json"), &list)
		if list == nil {
			t.Error("peers --json is not an array")
		}
	})

	t.Run("logs", func(t *testing.T) {
		testutil.Eventually(t, 5*time.Second, func() error {
			r := runCLI(context.Background(), addr, "logs", "core", "--lines", "500")
			if r.code != 0 || !strings.Contains(r.stdout, "domain claimed") {
				return fmt.Errorf("logs core: exit %d, %s", r.code, r.stdout)
			}
			return nil
		})
		var out struct {
			Channel string   `json:"channel"`
			Lines   []string `json:"lines"`
		}
		decode(t, cli(t, addr, 0, "logs", "--lines", "2", "--json"), &out)
		if out.Channel != "core" || len(out.Lines) != 2 {
			t.Errorf("logs --json = %+v, want 2 core lines", out)
		}
		cli(t, addr, ExitRefused, "logs", "../etc")
	})

	t.Run("metrics", func(t *testing.T) {
		r := cli(t, addr, 0, "metrics")
		contains(t, "metrics", r.stdout, "# TYPE peerdns_dns_queries_total counter", "go_goroutines", "peerdns_build_info")
		r = cli(t, addr, 0, "metrics", "peerdns_edge_")
		contains(t, "metrics filtered", r.stdout, "peerdns_edge_open_connections", "peerdns_edge_tls_handshakes_total")
		if strings.Contains(r.stdout, "go_goroutines") || strings.Contains(r.stdout, "peerdns_dns_") {
			t.Errorf("metrics peerdns_edge_ printed other families:\n%s", r.stdout)
		}
		var fams []metricFamily
		decode(t, cli(t, addr, 0, "metrics", "--json"), &fams)
		byName := map[string]metricFamily{}
		for _, f := range fams {
			byName[f.Name] = f
		}
		if f := byName["peerdns_dns_upstream_duration_seconds"]; f.Type != "histogram" || len(f.Samples) != 1 || f.Samples[0].Buckets["+Inf"] != *f.Samples[0].Count {
			t.Errorf("histogram in metrics --json = %+v", f)
		}
		if f := byName["peerdns_tunnel_info"]; f.Type != "gauge" || len(f.Samples) != 1 || f.Samples[0].Labels["kind"] != "server" {
			t.Errorf("tunnel_info in metrics --json = %+v", f)
		}
		if f := byName["go_gc_duration_seconds"]; f.Type != "summary" {
			t.Errorf("go_gc_duration_seconds in metrics --json = %+v", f)
		}
	})
}

// `logs -f` prints the history, then lines as they are written, and
// ends with exit 0 when interrupted.
func TestLogsFollow(t *testing.T) {
	n := startNode(t)
	addr := n.AdminAddr()
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", asJSON), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errOut testutil.LogBuffer
			args := []string{"-f", "core", "--lines", "1"}
			if asJSON {
				args = append(args, "--json")
			}
			done := make(chan int, 1)
			go func() {
				done <- Run(ctx, "logs", args, func(string) string { return addr }, &out, &errOut)
			}()
			testutil.Eventually(t, 5*time.Second, func() error {
				if strings.Count(out.String(), "\n") < 1 {
					return fmt.Errorf("no history line yet")
				}
				return nil
			})
			domain := fmt.Sprintf("follow%v.p2p", asJSON)
			// Lines written from now on come live; the claim logs one.
			if err := newClient(addr, 5*time.Second).post("/api/add-domain", map[string]any{"domain": domain, "hash": hashA}, nil); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, 10*time.Second, func() error {
				if !strings.Contains(out.String(), "domain="+domain) {
					return fmt.Errorf("no live line for %s yet:\n%s", domain, out.String())
				}
				return nil
			})
			if asJSON {
				for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
					var m map[string]any
					if err := json.Unmarshal([]byte(l), &m); err != nil || m["channel"] != "core" {
						t.Errorf("logs -f --json line %q is not a core JSON object (%v)", l, err)
					}
				}
			}
			cancel()
			select {
			case code := <-done:
				if code != 0 {
					t.Fatalf("logs -f interrupted: exit %d, stderr %q", code, errOut.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("logs -f did not stop when interrupted")
			}
		})
	}
}

// A node that is down and an address that is not a node: one line on
// stderr, nothing on stdout, exit 1, for every command; and `status` of
// a node whose status is null.
func TestNoNodeIsOneLineExitOne(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"isMaster":true}`)
	}))
	defer other.Close()
	notNode := strings.TrimPrefix(other.URL, "http://")
	// A node that answers every question with null.
	nulls := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "peerdns")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `null`)
	}))
	defer nulls.Close()
	r := runCLI(context.Background(), strings.TrimPrefix(nulls.URL, "http://"), "status")
	if r.code != ExitNoNode || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("peerdns status of a node answering null: exit %d, stdout %q, stderr %q; want exit 1 and one line", r.code, r.stdout, r.stderr)
	}
	for _, addr := range []string{down, notNode} {
		for _, args := range [][]string{
			{"status"}, {"domains"}, {"domains", "show", "x.p2p"}, {"domains", "add", "x.p2p", hashA}, {"domains", "remove", "x.p2p"},
			{"records"}, {"records", "add", "a.home", "A", "192.0.2.1"}, {"records", "remove", "a.home"},
			{"peers"}, {"tunnels"}, {"logs"}, {"logs", "-f"}, {"metrics"}, {"status", "--json"},
		} {
			r := runCLI(context.Background(), addr, args...)
			if r.code != ExitNoNode || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
				t.Errorf("peerdns %s at %s: exit %d, stdout %q, stderr %q; want exit 1 and one line", strings.Join(args, " "), addr, r.code, r.stdout, r.stderr)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"status", "extra"}, {"domains", "add", "x.p2p"}, {"domains", "bogus"}, {"domains", "show"},
		{"records", "add", "a.home"}, {"records", "remove"}, {"tunnels", "--ssl"}, {"peers", "--nope"},
		{"logs", "a", "b"}, {"status", "--timeout", "0s"},
	} {
		r := runCLI(context.Background(), "127.0.0.1:1", args...)
		if r.code != ExitUsage || r.stdout != "" {
			t.Errorf("peerdns %s: exit %d, stdout %q; want exit 2", strings.Join(args, " "), r.code, r.stdout)
		}
	}
}

// `domains show` of a domain named like a literal consensus path
// (status, metrics) shows that domain's consensus, not the sidecar's
// status or the consensus metrics.
func TestDomainsShowNamedLikeAConsensusPath(t *testing.T) {
	addr := startNode(t).AdminAddr()
	for _, name := range []string{"status", "metrics"} {
		cli(t, addr, 0, "domains", "add", name, hashA)
		testutil.Eventually(t, 5*time.Second, func() error {
			var shown shownDomain
			r := runCLI(context.Background(), addr, "domains", "show", name, "--json")
			if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil {
				return fmt.Errorf("domains show %s --json: exit %d, %v\n%s%s", name, r.code, err, r.stdout, r.stderr)
			}
			var cs struct {
				Status string `json:"status"`
				Hash   string `json:"hash"`
			}
			_ = json.Unmarshal(shown.Consensus, &cs)
			if cs.Status != "resolved" || cs.Hash != hashA {
				return fmt.Errorf("domains show %s --json: consensus %s, want %s resolved to %s", name, shown.Consensus, name, hashA)
			}
			return nil
		})
	}
}

// With a second node joined, `peers` lists it connected on the direct
// path with a round-trip time, and /metrics counts it.
func TestPeersWithTwoNodes(t *testing.T) {
	a := startNode(t)
	addr := a.AdminAddr()
	var inv struct {
		Invite string `json:"invite"`
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		return newClient(addr, 5*time.Second).post("/api/invites", map[string]any{}, &inv)
	})
	b, err := node.Start(node.Config{
		Data: t.TempDir(), AdminAddr: "127.0.0.1:0", DNSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		HTTPSAddr: "127.0.0.1:0", P2PAddr: "127.0.0.1:0", AdminDomain: "admin.p2p", LogLevel: "info",
		Upstream: []string{"127.0.0.1:1"}, Join: inv.Invite,
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	testutil.Eventually(t, 30*time.Second, func() error {
		var list []peerRow
		r := runCLI(context.Background(), addr, "peers", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
			return fmt.Errorf("peers --json: %v %s %s", err, r.stdout, r.stderr)
		}
		for _, p := range list {
			if p.ID == b.ID() && p.State == "connected" && p.RTTMillis > 0 {
				return nil
			}
		}
		return fmt.Errorf("no connected peer %s with an RTT: %+v", b.ID()[:8], list)
	})
	r := cli(t, addr, 0, "peers")
	contains(t, "peers", r.stdout, b.ID(), "connected", "direct", "LOST")
	if !regexp.MustCompile(`connected +direct +\S+ +\S+ +[0-9]+\.[0-9]{2}%`).MatchString(r.stdout) {
		t.Fatalf("peers: no loss share in the connected peer's row:\n%s", r.stdout)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		r := runCLI(context.Background(), addr, "metrics", "peerdns_peer")
		for _, w := range []string{`peerdns_peers{path="direct",state="connected"} 1`, `peerdns_peer_rtt_seconds{path="direct",peer="` + b.ID() + `"}`,
			`peerdns_peer_quic_packets_sent_total{path="direct",peer="` + b.ID() + `"}`, `peerdns_peer_quic_packets_lost_total{path="direct",peer="` + b.ID() + `"}`,
			`peerdns_peer_quic_congestion_window_bytes{path="direct",peer="` + b.ID() + `"}`} {
			if !strings.Contains(r.stdout, w) {
				return fmt.Errorf("metrics lack %q:\n%s", w, r.stdout)
			}
		}
		return nil
	})
	r = cli(t, addr, 0, "status")
	contains(t, "status with a peer", r.stdout, "peers connected  1")
}
