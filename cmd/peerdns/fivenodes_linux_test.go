package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"peerdns/bench/procstat"
	"peerdns/internal/testutil"
)

// Five real `peerdns node` processes, each in a network namespace of its
// own on a bridge the test makes (192.0.2.0/24 inside those namespaces
// only): 1,000 claims on one node agreed by all five; a partition of 2
// from 3 with a conflicting claim on each side, healed, after which all
// five agree and no acknowledged write is lost; and a node killed with
// SIGKILL in the middle of a burst and started again. Without the rights
// to make namespaces (root and iproute2) it runs on loopback instead and
// leaves the partition out, and says so.
func TestFiveProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: five node processes and a partition take about a minute")
	}
	net := newTestNet(t)
	nodes := make([]*fiveNode, 5)
	nodes[0] = net.start(t, 0, "")
	for i := 1; i < 5; i++ {
		nodes[i] = net.start(t, i, nodes[0].invite(t))
	}
	hashA, hashB := testutil.Hash('a'), testutil.Hash('b')
	nodes[0].claim(t, "probe.p2p", hashA)
	waitAll(t, 60*time.Second, nodes, func(n *fiveNode) error { return n.wantActive(t, "probe.p2p", 5) })

	// 1,000 claims on one node; the nodes' CPU time is read around the
	// burst (a steadier figure than the wall time on a shared machine).
	// A watcher per node, started now and told to poll once every claim
	// is acknowledged, times when its node has them all resolved (a
	// client process started after the burst would add its own start).
	watchers := make([]*burst, len(nodes))
	for i, n := range nodes {
		watchers[i] = n.watch(t, "bulk", 1000)
	}
	ops0 := nodes[0].ledgerOps(t)
	bulk := nodes[0].claimsAsync(t, "bulk", 1000, 16, hashA, "gated")
	cpu0 := nodesCPU(t, nodes)
	start := time.Now()
	bulk.release(t)
	acked := bulk.wait()
	ackedAt := time.Since(start)
	cpuAcked := nodesCPU(t, nodes)
	if len(acked) != 1000 {
		t.Fatalf("%d of 1,000 claims acknowledged", len(acked))
	}
	var resolvedAt time.Duration
	for _, w := range watchers {
		w.release(t)
	}
	for i, w := range watchers {
		resolvedAt = max(resolvedAt, w.resolvedAt(t, i).Sub(start))
	}
	waitAll(t, 60*time.Second, nodes, func(n *fiveNode) error { return n.wantResolved(t, acked) })
	t.Logf("1,000 claims: acknowledged in %v, resolved on all five after %v (%s); the five nodes' CPU until acknowledged %.2f s (writer %.2f s); %d signed ops",
		ackedAt.Round(time.Millisecond), resolvedAt.Round(time.Millisecond), net.kind(), sum(cpuAcked)-sum(cpu0), cpuAcked[0]-cpu0[0], nodes[0].ledgerOps(t)-ops0)
	if os.Getenv("FIVE_DIAG_STOP") != "" {
		return // a diagnosis run: profiles (PEERDNS_CPUPROFILE) of the burst alone
	}

	if net.ns != "" {
		// Partition {0,1} | {2,3,4}; a conflicting claim on each side.
		net.partition(t, []int{0, 1})
		waitAll(t, 20*time.Second, nodes[:2], func(n *fiveNode) error { return n.wantActive(t, "probe.p2p", 2) })
		waitAll(t, 20*time.Second, nodes[2:], func(n *fiveNode) error { return n.wantActive(t, "probe.p2p", 3) })
		nodes[0].claim(t, "split.p2p", hashA)
		nodes[2].claim(t, "split.p2p", hashB)
		left := nodes[1].claims(t, "left", 50, 4, hashA)
		right := nodes[3].claims(t, "right", 50, 4, hashB)
		net.heal(t)
		healed := time.Now()
		var want *consensusView
		waitAll(t, 60*time.Second, nodes, func(n *fiveNode) error {
			if err := n.wantActive(t, "probe.p2p", 5); err != nil {
				return err
			}
			if err := n.wantResolved(t, append(append([]string{}, left...), right...)); err != nil {
				return err
			}
			v := n.consensus(t, "split.p2p")
			if v.Status != "resolved" || v.Hash == "" {
				return fmt.Errorf("node %d: split.p2p %+v", n.i, v)
			}
			return nil
		})
		for _, n := range nodes {
			v := n.consensus(t, "split.p2p")
			if want == nil {
				want = &v
			} else if v.Hash != want.Hash || v.Status != want.Status {
				t.Fatalf("after healing node %d has split.p2p %+v, node 0 %+v", n.i, v, *want)
			}
		}
		t.Logf("partition healed: all five agree on split.p2p = %s after %v", want.Hash[:12], time.Since(healed).Round(time.Millisecond))
	} else {
		t.Log("network namespaces unavailable (run as root with iproute2): the partition part is left out on loopback")
	}

	// SIGKILL mid-burst, then start it again on its data.
	victim := nodes[3]
	burst := victim.claimsAsync(t, "kill", 300, 8, hashA)
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := burst.count(); n < 50 {
			return fmt.Errorf("%d acked so far", n)
		}
		return nil
	})
	if err := victim.proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	ackedBeforeKill := burst.wait()
	nodes[3] = net.restart(t, victim)
	waitAll(t, 60*time.Second, nodes, func(n *fiveNode) error { return n.wantResolved(t, ackedBeforeKill) })
	t.Logf("kill -9 after %d acknowledged claims: every one resolved on all five after the restart", len(ackedBeforeKill))
}

// nodesCPU is each node process's user+system CPU seconds.
func nodesCPU(t *testing.T, nodes []*fiveNode) []float64 {
	t.Helper()
	out := make([]float64, len(nodes))
	for i, n := range nodes {
		s, err := procstat.CPUSeconds(n.proc.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = s
	}
	return out
}

func sum(xs []float64) (s float64) {
	for _, x := range xs {
		s += x
	}
	return s
}

// watch starts a client that, once released, polls the node until the
// domains prefix0000 … prefix<n-1> all resolve (client mode "watch").
func (f *fiveNode) watch(t *testing.T, prefix string, n int) *burst {
	return f.startClient(t, true, "watch", "http://"+f.admin, prefix, fmt.Sprint(n))
}

// resolvedAt is when a watch client saw every domain resolved.
func (b *burst) resolvedAt(t *testing.T, node int) time.Time {
	t.Helper()
	if err := b.cmd.Wait(); err != nil {
		t.Fatalf("node %d: the burst's domains did not all resolve within 60 s (%v)", node, err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(b.out.String()), 10, 64)
	if err != nil {
		t.Fatalf("node %d: watcher printed %q", node, b.out.String())
	}
	return time.Unix(0, ns)
}

// waitAll polls check on every node until all pass.
func waitAll(t *testing.T, within time.Duration, nodes []*fiveNode, check func(*fiveNode) error) {
	t.Helper()
	testutil.Eventually(t, within, func() error {
		for _, n := range nodes {
			if err := check(n); err != nil {
				return err
			}
		}
		return nil
	})
}

// testNet is where the five nodes live: namespaces on a bridge, or
// loopback.
type testNet struct {
	ns  string // namespace name prefix; "" on loopback
	hub string // the bridge namespace
}

func (n *testNet) kind() string {
	if n.ns == "" {
		return "loopback"
	}
	return "network namespaces on a bridge"
}

func newTestNet(t *testing.T) *testNet {
	if os.Geteuid() != 0 {
		return &testNet{}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return &testNet{}
	}
	pfx := fmt.Sprintf("pdns%d", os.Getpid()%100000)
	n := &testNet{ns: pfx, hub: pfx + "h"}
	if err := ipCmd("netns", "add", n.hub); err != nil {
		t.Logf("cannot make network namespaces (%v); running on loopback", err)
		return &testNet{}
	}
	t.Cleanup(func() {
		for i := 0; i < 5; i++ {
			_ = ipCmd("netns", "del", n.nsName(i))
		}
		_ = ipCmd("netns", "del", n.hub)
	})
	must := func(args ...string) {
		if err := ipCmd(args...); err != nil {
			t.Fatalf("ip %s: %v", strings.Join(args, " "), err)
		}
	}
	must("-n", n.hub, "link", "add", "br0", "type", "bridge")
	must("-n", n.hub, "link", "add", "br1", "type", "bridge")
	must("-n", n.hub, "link", "set", "br0", "up")
	must("-n", n.hub, "link", "set", "br1", "up")
	for i := 0; i < 5; i++ {
		ns := n.nsName(i)
		must("netns", "add", ns)
		must("-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", fmt.Sprintf("h%d", i), "netns", n.hub)
		must("-n", n.hub, "link", "set", fmt.Sprintf("h%d", i), "master", "br0")
		must("-n", n.hub, "link", "set", fmt.Sprintf("h%d", i), "up")
		must("-n", ns, "addr", "add", n.ip(i)+"/24", "dev", "v0")
		must("-n", ns, "link", "set", "v0", "up")
		must("-n", ns, "link", "set", "lo", "up")
	}
	return n
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (n *testNet) nsName(i int) string { return fmt.Sprintf("%s-%d", n.ns, i) }

func (n *testNet) ip(i int) string {
	if n.ns == "" {
		return "127.0.0.1"
	}
	return fmt.Sprintf("192.0.2.%d", i+1)
}

// wrap is the command prefix that runs a program in node i's namespace.
func (n *testNet) wrap(i int) []string {
	if n.ns == "" {
		return nil
	}
	return []string{"ip", "netns", "exec", n.nsName(i)}
}

// partition moves the given nodes' ports to the second bridge.
func (n *testNet) partition(t *testing.T, side []int) {
	for _, i := range side {
		if err := ipCmd("-n", n.hub, "link", "set", fmt.Sprintf("h%d", i), "master", "br1"); err != nil {
			t.Fatal(err)
		}
	}
}

// heal puts every port back on the first bridge.
func (n *testNet) heal(t *testing.T) {
	for i := 0; i < 5; i++ {
		if err := ipCmd("-n", n.hub, "link", "set", fmt.Sprintf("h%d", i), "master", "br0"); err != nil {
			t.Fatal(err)
		}
	}
}

// fiveNode is one node process and how to reach it.
type fiveNode struct {
	net   *testNet
	i     int
	dir   string
	proc  *exec.Cmd
	admin string
}

func (n *testNet) start(t *testing.T, i int, invite string) *fiveNode {
	t.Helper()
	node := &fiveNode{net: n, i: i, dir: t.TempDir()}
	extra := []string{"--p2p-addr", n.ip(i) + ":0"}
	if invite != "" {
		extra = append(extra, "--join", invite)
	}
	node.proc, node.admin = startProcessWrapped(t, n.wrap(i), node.dir, extra...)
	return node
}

func (n *testNet) restart(t *testing.T, old *fiveNode) *fiveNode {
	t.Helper()
	_ = old.proc.Wait()
	node := &fiveNode{net: n, i: old.i, dir: old.dir}
	node.proc, node.admin = startProcessWrapped(t, n.wrap(old.i), node.dir, "--p2p-addr", n.ip(old.i)+":0")
	return node
}

// client runs the test binary's client mode in the node's namespace.
func (f *fiveNode) client(args ...string) *exec.Cmd {
	argv := append(append(append([]string{}, f.net.wrap(f.i)...), os.Args[0]), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PEERDNS_TEST_CLIENT=1")
	return cmd
}

func (f *fiveNode) call(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	out, err := f.client("call", method, "http://"+f.admin+path, body).Output()
	if err != nil {
		t.Fatalf("node %d: %s %s: %v", f.i, method, path, err)
	}
	status, rest, _ := strings.Cut(string(out), "\n")
	var code int
	fmt.Sscanf(status, "%d", &code)
	return code, rest
}

func (f *fiveNode) invite(t *testing.T) string {
	t.Helper()
	code, body := f.call(t, "POST", "/api/invites", "")
	var r struct{ Invite string }
	if code != 200 || json.Unmarshal([]byte(body), &r) != nil || r.Invite == "" {
		t.Fatalf("invite: %d %s", code, body)
	}
	return r.Invite
}

func (f *fiveNode) claim(t *testing.T, domain, hash string) {
	t.Helper()
	if code, body := f.call(t, "POST", "/api/add-domain", `{"domain":"`+domain+`","hash":"`+hash+`"}`); code != 200 {
		t.Fatalf("node %d add-domain %s: %d %s", f.i, domain, code, body)
	}
}

func (f *fiveNode) claims(t *testing.T, prefix string, n, workers int, hash string) []string {
	t.Helper()
	return f.claimsAsync(t, prefix, n, workers, hash).wait()
}

// burst is a client process running in the background (claims or watch).
type burst struct {
	cmd *exec.Cmd
	in  io.WriteCloser // gated clients only
	out *testutil.LogBuffer
}

// claimsAsync starts a claims client; with "gated" in extra it waits for
// release before it sends anything.
func (f *fiveNode) claimsAsync(t *testing.T, prefix string, n, workers int, hash string, extra ...string) *burst {
	t.Helper()
	args := append([]string{"claims", "http://" + f.admin, prefix, fmt.Sprint(n), fmt.Sprint(workers), hash}, extra...)
	return f.startClient(t, len(extra) > 0, args...)
}

// startClient starts a client process in the node's namespace, its
// output captured; a gated one waits for release (a line on its stdin).
func (f *fiveNode) startClient(t *testing.T, gated bool, args ...string) *burst {
	t.Helper()
	b := &burst{cmd: f.client(args...), out: &testutil.LogBuffer{}}
	b.cmd.Stdout = b.out
	if gated {
		in, err := b.cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		b.in = in
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.cmd.Process.Kill(); _ = b.cmd.Wait() })
	return b
}

// release lets a gated client go.
func (b *burst) release(t *testing.T) {
	if _, err := io.WriteString(b.in, "go\n"); err != nil {
		t.Fatal(err)
	}
}

func (b *burst) count() int { return len(b.lines()) }

func (b *burst) lines() []string { return strings.Fields(b.out.String()) }

// wait waits for the client to end and returns the acknowledged domains.
func (b *burst) wait() []string {
	_ = b.cmd.Wait()
	return b.lines()
}

type consensusView struct {
	Status      string `json:"status"`
	Hash        string `json:"hash"`
	ActivePeers int    `json:"activePeers"`
}

func (f *fiveNode) consensus(t *testing.T, domain string) consensusView {
	t.Helper()
	code, body := f.call(t, "GET", "/api/consensus/"+domain, "")
	var v consensusView
	if code == 200 {
		_ = json.Unmarshal([]byte(body), &v)
	}
	return v
}

// ledgerOps is the number of ops in the node's ledger.
func (f *fiveNode) ledgerOps(t *testing.T) int {
	t.Helper()
	code, body := f.call(t, "GET", "/api/consensus/status", "")
	var st struct {
		Length int `json:"length"`
	}
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
		t.Fatalf("node %d: consensus status %d %q", f.i, code, body)
	}
	return st.Length
}

func (f *fiveNode) wantActive(t *testing.T, domain string, active int) error {
	if v := f.consensus(t, domain); v.ActivePeers != active {
		return fmt.Errorf("node %d: %s has %d active peers, want %d", f.i, domain, v.ActivePeers, active)
	}
	return nil
}

// wantResolved checks that every domain is claimed and resolved here.
func (f *fiveNode) wantResolved(t *testing.T, domains []string) error {
	code, body := f.call(t, "GET", "/api/resolved-domains", "")
	if code != 200 {
		return fmt.Errorf("node %d: resolved-domains %d", f.i, code)
	}
	var list []struct {
		Domain          string `json:"domain"`
		ConsensusStatus string `json:"consensusStatus"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		return err
	}
	have := make(map[string]string, len(list))
	for _, d := range list {
		have[d.Domain] = d.ConsensusStatus
	}
	missing := 0
	for _, d := range domains {
		if have[d] != "resolved" {
			missing++
		}
	}
	if missing > 0 {
		return fmt.Errorf("node %d: %d of %d domains not resolved yet", f.i, missing, len(domains))
	}
	return nil
}
