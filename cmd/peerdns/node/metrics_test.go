package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"peerdns/internal/testutil"
)

// scrape GETs /metrics at base (optionally with another Host) and
// returns the status, content type and body.
func scrape(t *testing.T, base, host string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// askDNS sends one question over UDP to the node and returns the rcode.
func askDNS(t *testing.T, addr, name string) int {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	m, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(q, addr)
	if err != nil {
		t.Fatalf("DNS %s: %v", name, err)
	}
	return m.Rcode
}

// The node's /metrics carries every family the node promises, answers
// through the admin domain on the edge as on the admin address, and is
// what promtool calls clean.
func TestMetricsEndpoint(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	if rc := askDNS(t, n.dns.Addr(), "nobody.p2p."); rc != dns.RcodeNameError {
		t.Fatalf("nobody.p2p. rcode %d, want NXDOMAIN", rc)
	}
	if rc := askDNS(t, n.dns.Addr(), "admin.p2p."); rc != dns.RcodeSuccess {
		t.Fatalf("admin.p2p. rcode %d, want NOERROR", rc)
	}
	httpAddr, _ := n.EdgeAddrs()
	// Through the edge, by the admin domain.
	st, ctype, body := scrape(t, "http://"+httpAddr, "admin.p2p")
	if st != 200 || !strings.HasPrefix(ctype, "text/plain") || !strings.Contains(body, "peerdns_build_info") {
		t.Fatalf("/metrics through the edge: %d %q %.200s", st, ctype, body)
	}
	// A host the edge does not serve is counted under route="none".
	if st, _, _ := scrape(t, "http://"+httpAddr, "nothing.example"); st != 404 {
		t.Fatalf("unknown host on the edge: %d, want 404", st)
	}
	var last string
	testutil.Eventually(t, 5*time.Second, func() error {
		st, _, body := scrape(t, base, "")
		if st != 200 {
			return fmt.Errorf("status %d", st)
		}
		last = body
		for _, want := range []string{
			`peerdns_dns_responses_total{rcode="NXDOMAIN",source="p2p"} 1`,
			`peerdns_dns_responses_total{rcode="NOERROR",source="internal"} 1`,
			`peerdns_dns_queries_total 2`,
			`peerdns_dns_upstream_duration_seconds_bucket{le="+Inf"}`,
			`peerdns_edge_requests_total{code="200",route="admin"} 1`,
			`peerdns_edge_requests_total{code="404",route="none"} 1`,
			`peerdns_edge_response_bytes_total{route="admin"}`,
			`peerdns_edge_open_connections`,
			`peerdns_edge_tls_handshakes_total{result="ok"} 0`,
			`peerdns_admin_requests_total{result="ok"}`,
			`peerdns_peers{path="direct",state="connected"} 0`,
			`peerdns_peer_send_losses_total 0`,
			`peerdns_peer_udp_gro_merged_total `,
			`peerdns_ledger_ops `,
			`peerdns_ledger_ops_refused_total 0`,
			`peerdns_consensus_resolutions_total`,
			"go_goroutines ",
			"process_cpu_seconds_total ",
			"process_resident_memory_bytes ",
		} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("no %q", want)
			}
		}
		return nil
	})
	// A client asking for gzip, as Prometheus does, gets plain text: a
	// gzip writer's state costs more than the exposition it would save.
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if enc := resp.Header.Get("Content-Encoding"); enc != "" || !bytes.Contains(plain, []byte("peerdns_build_info")) {
		t.Fatalf("a scrape asking for gzip: Content-Encoding %q, body %.100q", enc, plain)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install prometheus): the exposition was not linted")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(last)
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// A tunnel server shows in the tunnel families under its id, and a
// domain claimed on the node in the ledger's ops.
func TestMetricsTunnelsAndLedger(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	var created struct {
		ID string `json:"id"`
	}
	mustJSON(t, "POST", base+"/api/tunnel-create", `{"name":"web","port":8080}`, 200, &created)
	addDomain(t, base, "metrics.p2p", hashA)
	testutil.Eventually(t, 5*time.Second, func() error {
		_, _, body := scrape(t, base, "")
		for _, want := range []string{
			fmt.Sprintf(`peerdns_tunnel_info{kind="server",state="running",tunnel=%q} 1`, created.ID),
			fmt.Sprintf(`peerdns_tunnel_streams_total{kind="server",tunnel=%q} 0`, created.ID),
			fmt.Sprintf(`peerdns_tunnel_bytes_total{direction="in",kind="server",tunnel=%q} 0`, created.ID),
			"peerdns_ledger_domains 1",
			"peerdns_view_version ",
		} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("no %q", want)
			}
		}
		return nil
	})
}

// A hundred scrapes at once are answered (200, or 503 beyond the
// in-flight limit), gather at most once per gatherEvery, and DNS answers
// all the while.
func TestMetricsScrapeFlood(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	var wg sync.WaitGroup
	statuses := make(chan int, 100)
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	start := time.Now()
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get(base + "/metrics")
			if err != nil {
				statuses <- -1
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	for i := 0; i < 20; i++ {
		if rc := askDNS(t, n.dns.Addr(), "admin.p2p."); rc != dns.RcodeSuccess {
			t.Fatalf("DNS during the flood: rcode %d", rc)
		}
	}
	wg.Wait()
	close(statuses)
	ok := 0
	for st := range statuses {
		switch st {
		case 200:
			ok++
		case 503:
		default:
			t.Fatalf("scrape answered %d", st)
		}
	}
	if ok == 0 {
		t.Fatal("no scrape succeeded")
	}
	t.Logf("100 concurrent scrapes: %d answered 200 in %v", ok, time.Since(start))
}

// A real Prometheus (Debian's prometheus) scrapes the node, and its
// query API returns the node's series.
func TestPrometheusScrapesNode(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not installed (apt-get install prometheus)")
	}
	n := newTestNode(t, t.TempDir())
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 250ms\n  scrape_timeout: 200ms\nscrape_configs:\n  - job_name: peerdns\n    static_configs:\n      - targets: [%q]\n", n.AdminAddr())
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out testutil.LogBuffer
	var promAddr string
	var cmd *exec.Cmd
	// The port is free when picked; another process could take it before
	// Prometheus binds it, so a failed start picks another (three tries).
	for try := 0; try < 3; try++ {
		promAddr = testutil.FreeTCPAddr(t)
		ctx, cancel := context.WithCancel(context.Background())
		cmd = exec.CommandContext(ctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
			"--storage.tsdb.path="+filepath.Join(dir, fmt.Sprint("data", try)), "--web.listen-address="+promAddr)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatalf("start prometheus: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() { cancel(); <-exited })
		ready := false
		deadline := time.Now().Add(20 * time.Second)
		for !ready && time.Now().Before(deadline) {
			select {
			case <-exited:
				deadline = time.Now()
				continue
			case <-time.After(50 * time.Millisecond):
			}
			if resp, err := http.Get("http://" + promAddr + "/-/ready"); err == nil {
				resp.Body.Close()
				ready = resp.StatusCode == 200
			}
		}
		if ready {
			break
		}
		if try == 2 {
			t.Fatalf("prometheus did not become ready:\n%s", out.String())
		}
	}
	query := func(q string) ([]json.RawMessage, error) {
		resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var r struct {
			Status string `json:"status"`
			Data   struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return nil, err
		}
		if r.Status != "success" {
			return nil, fmt.Errorf("query %s: status %s", q, r.Status)
		}
		return r.Data.Result, nil
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, q := range []string{`up{job="peerdns"} == 1`, `peerdns_build_info{job="peerdns"}`, `peerdns_dns_queries_total`, `go_goroutines{job="peerdns"}`} {
			res, err := query(q)
			if err != nil {
				return err
			}
			if len(res) == 0 {
				return fmt.Errorf("no series for %s", q)
			}
		}
		return nil
	})
}

func TestMetricsTLSHandshakes(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	_, httpsAddr := n.EdgeAddrs()
	c := edgeClient(httpsAddr, rootPool(t, n))
	defer c.CloseIdleConnections()
	resp, err := c.Get("https://admin.p2p/metrics")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("https://admin.p2p/metrics: %d", resp.StatusCode)
	}
	conn, err := tls.Dial("tcp", httpsAddr, &tls.Config{ServerName: "nothing.example", InsecureSkipVerify: true})
	if err == nil {
		conn.Close()
		t.Fatal("a handshake for a name without a site succeeded")
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		_, _, body := scrape(t, "http://"+n.AdminAddr(), "")
		for _, want := range []string{`peerdns_edge_tls_handshakes_total{result="ok"} 1`, `peerdns_edge_tls_handshakes_total{result="no_certificate"} 1`,
			`peerdns_edge_requests_total{code="200",route="admin"} 1`} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("no %q", want)
			}
		}
		return nil
	})
}
