//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"peerdns/bench/natlab"
	"peerdns/bench/procstat"
)

// fleet is the lab and its node processes: node i sits on the public
// segment at 203.0.113.(10+i) in a namespace of its own.
type fleet struct {
	lab   *natlab.Lab
	bin   string
	work  string
	nodes []*member
	logf  func(format string, a ...any)
	// joinedBy[i] is the node whose invite node i used (-1 for node 0).
	joinedBy []int
	cut      bool // a partition table is loaded in the internet namespace
	// env is every node's extra environment; profile says they write CPU
	// profiles, so the run's end stops them with SIGTERM (the profile is
	// written as the node shuts down) instead of SIGKILL.
	env     []string
	profile bool
}

// member is one node: its place stays, its process may be killed and
// started again on the same data.
type member struct {
	i     int
	place *natlab.Place
	dir   string
	mu    sync.Mutex
	node  *natlab.Node // nil while down
	runs  int
	http  *http.Client // through the node's namespace, callTimeout
}

// callTimeout bounds one admin API request of the run. natlab's own
// client gives up after 5 s; on a loaded machine a durable add-domain
// among fifty busy processes can take longer, and a request given up is
// a claim whose outcome is unknown.
const callTimeout = 30 * time.Second

// call sends one admin API request to node i.
func (f *fleet) call(i int, method, path, body string) (int, []byte, error) {
	m := f.nodes[i]
	m.mu.Lock()
	c := m.http
	running := m.node != nil
	m.mu.Unlock()
	if !running {
		return 0, nil, fmt.Errorf("node %d is down", i)
	}
	req, err := http.NewRequest(method, "http://"+natlab.AdminAddr+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// getJSON decodes node i's 200 answer to GET path into v.
func (f *fleet) getJSON(i int, path string, v any) error {
	code, b, err := f.call(i, "GET", path, "")
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("GET %s: %d %s", path, code, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, v)
}

func (m *member) get() *natlab.Node {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.node
}

// maxNodes: addresses .10 to .249 of the public segment.
const maxNodes = 240

func newFleet(prefix, bin, work string, n int, profile, profileStep string, logf func(string, ...any)) (*fleet, error) {
	if n < 2 || n > maxNodes {
		return nil, fmt.Errorf("nodes: %d, want 2 to %d", n, maxNodes)
	}
	lab, err := natlab.New(prefix)
	if err != nil {
		return nil, err
	}
	f := &fleet{lab: lab, bin: bin, work: work, logf: logf, joinedBy: make([]int, n)}
	if profile != "" {
		f.env, f.profile = []string{"PEERDNS_CPUPROFILE=" + filepath.Join(profile, "cpu-%p.prof")}, true
		if profileStep != "" {
			f.env = append(f.env, "PEERDNS_CPUPROFILE_WINDOW=signals")
		}
	}
	for i := 0; i < n; i++ {
		p, err := lab.AddPublicHost(fmt.Sprintf("203.0.113.%d", 10+i))
		if err != nil {
			lab.Close()
			return nil, err
		}
		f.nodes = append(f.nodes, &member{i: i, place: p, dir: filepath.Join(work, fmt.Sprintf("node%02d", i))})
	}
	// Without permanent neighbour entries, 50 nodes overflow the kernel's
	// one ARP table for all namespaces (natlab's PinNeighbours).
	if err := lab.PinNeighbours(); err != nil {
		lab.Close()
		return nil, err
	}
	return f, nil
}

// close stops every process (SIGKILL: the run is over, nothing of theirs
// is kept) and deletes every namespace.
func (f *fleet) close() {
	var wg sync.WaitGroup
	for _, m := range f.nodes {
		wg.Add(1)
		go func(m *member) {
			defer wg.Done()
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.node != nil {
				if f.profile {
					m.node.Stop()
				} else {
					m.node.Kill()
				}
				m.node = nil
			}
		}(m)
	}
	wg.Wait()
	f.lab.Close()
}

// start runs node i's process (invite "" on a restart: the node rejoins
// from its data).
func (f *fleet) start(i int, invite string) error {
	m := f.nodes[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.node != nil {
		return fmt.Errorf("node %d already running", i)
	}
	if m.runs > 0 {
		_ = os.Rename(filepath.Join(m.dir, "node.log"), filepath.Join(m.dir, fmt.Sprintf("node.log.%d", m.runs)))
	}
	n, err := natlab.StartEnv(f.bin, fmt.Sprintf("node%d", i), m.place, m.dir, invite, f.env)
	if err != nil {
		return err
	}
	m.node = n
	m.runs++
	// Connections are kept for the burst's concurrent clients: a new one
	// costs a thread that enters the namespace and then exits.
	m.http = &http.Client{Timeout: callTimeout, Transport: &http.Transport{
		DialContext:         func(ctx context.Context, _, addr string) (net.Conn, error) { return n.Dial(ctx, addr) },
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     time.Minute,
	}}
	return nil
}

// kill ends node i with SIGKILL.
func (f *fleet) kill(i int) {
	m := f.nodes[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.node != nil {
		m.node.Kill()
		m.node = nil
	}
}

// join starts every node: node 0 alone, then waves of up to `wave`
// nodes (no more than have joined) started side by side, each with an invite from a node picked at
// random among those already joined (so node 0 is not the only
// introducer), each wave waiting until its nodes are connected.
func (f *fleet) join(ctx context.Context, rng *rand.Rand, wave int, within time.Duration) error {
	f.joinedBy[0] = -1
	if err := f.start(0, ""); err != nil {
		return err
	}
	joined := []int{0}
	for next := 1; next < len(f.nodes); {
		if err := ctx.Err(); err != nil {
			return err
		}
		// A wave is no larger than the set already joined: 1, 2, 4, ...
		// up to wave, so the first waves do not all come from node 0.
		end := min(next+min(wave, len(joined)), len(f.nodes))
		errs := make([]error, end-next)
		var wg sync.WaitGroup
		for i := next; i < end; i++ {
			by := joined[rng.Intn(len(joined))]
			f.joinedBy[i] = by
			// An overloaded node may not answer within the client's 5 s:
			// asked again, within the join bound.
			var inv string
			err := poll(ctx, within, func() error {
				var err error
				var r struct {
					Invite string `json:"invite"`
				}
				code, b, err := f.call(by, "POST", "/api/invites", "")
				if err == nil && code == 200 {
					err = json.Unmarshal(b, &r)
				} else if err == nil {
					err = fmt.Errorf("POST /api/invites: %d %s", code, bytes.TrimSpace(b))
				}
				inv = r.Invite
				return err
			})
			if err != nil {
				return fmt.Errorf("invite from node %d: %w", by, err)
			}
			wg.Add(1)
			go func(i int, inv string) {
				defer wg.Done()
				errs[i-next] = f.start(i, inv)
			}(i, inv)
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		// Each new node is connected to at least one peer (its
		// introducer or another) before the next wave picks from them.
		err := poll(ctx, within, func() error {
			for i := next; i < end; i++ {
				ids, err := f.peers(i)
				if err != nil {
					return fmt.Errorf("node %d: %w", i, err)
				}
				if len(ids) == 0 {
					return fmt.Errorf("node %d has no connected peer", i)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("wave %d-%d: %w", next, end-1, err)
		}
		for i := next; i < end; i++ {
			joined = append(joined, i)
		}
		next = end
	}
	return nil
}

// peers is node i's connected peers (GET /api/peers).
func (f *fleet) peers(i int) ([]string, error) {
	var ids []string
	err := f.getJSON(i, "/api/peers", &ids)
	return ids, err
}

// meshed waits until each running node in set is connected to at least
// want of the others in set (want < 0 or more than the others: all of
// them) and hears every other node of set: connected, or heard through
// the signed heartbeats that travel the overlay (the diagnostics'
// overlay.heardByHeartbeat), which is what counts a writer active for
// quorum beyond the active view. It returns the connected counts.
func (f *fleet) meshed(ctx context.Context, set []int, want int, within time.Duration) ([]int, error) {
	ids := map[string]int{}
	for _, i := range set {
		if n := f.nodes[i].get(); n != nil {
			ids[n.ID] = i
		}
	}
	conns := make([]int, len(set))
	err := poll(ctx, within, func() error {
		return forAll(set, 8, func(i int) error {
			got, err := f.peers(i)
			if err != nil {
				return fmt.Errorf("node %d: %w", i, err)
			}
			in := 0
			for _, id := range got {
				if j, ok := ids[id]; ok && j != i {
					in++
				}
			}
			for k, j := range set {
				if j == i {
					conns[k] = in
				}
			}
			w := want
			if w < 0 || w > len(set)-1 {
				w = len(set) - 1
			}
			if in < w {
				return fmt.Errorf("node %d is connected to %d of the other %d, want %d", i, in, len(set)-1, w)
			}
			if in == len(set)-1 {
				return nil
			}
			var d struct {
				Summary struct {
					Overlay *struct {
						HeardByHeartbeat int `json:"heardByHeartbeat"`
					} `json:"overlay"`
				} `json:"summary"`
			}
			if err := f.getJSON(i, "/api/diagnostics/invites", &d); err != nil {
				return fmt.Errorf("node %d: %w", i, err)
			}
			heard := 0
			if d.Summary.Overlay != nil {
				heard = d.Summary.Overlay.HeardByHeartbeat
			}
			if in+heard < len(set)-1 {
				return fmt.Errorf("node %d hears %d of the other %d (%d connected, %d by heartbeat)", i, in+heard, len(set)-1, in, heard)
			}
			return nil
		})
	})
	return conns, err
}

// partition splits the segment in two: the bridge in the internet
// namespace drops every IPv4 packet between an address of side a and one
// of side b (an nftables table of the bridge family, so no node's own
// namespace is touched and ARP still passes). heal deletes the table.
func (f *fleet) partition(a, b []int) error {
	addrs := func(set []int) string {
		var s []string
		for _, i := range set {
			s = append(s, f.nodes[i].place.IP)
		}
		return strings.Join(s, ", ")
	}
	rules := "table bridge f50cut {\n" +
		"  set a { type ipv4_addr; elements = { " + addrs(a) + " } }\n" +
		"  set b { type ipv4_addr; elements = { " + addrs(b) + " } }\n" +
		"  chain forward { type filter hook forward priority filter; policy accept;\n" +
		"    ether type ip ip saddr @a ip daddr @b drop\n" +
		"    ether type ip ip saddr @b ip daddr @a drop\n" +
		"  }\n}\n"
	if err := natlab.Nft(f.lab.Inet(), rules); err != nil {
		return err
	}
	f.cut = true
	return nil
}

func (f *fleet) heal() error {
	if !f.cut {
		return nil
	}
	if err := natlab.Nft(f.lab.Inet(), "delete table bridge f50cut\n"); err != nil {
		return err
	}
	f.cut = false
	return nil
}

// rssKB is node i's resident memory (VmRSS), 0 when unknown.
func (f *fleet) rssKB(i int) int {
	n := f.nodes[i].get()
	if n == nil {
		return 0
	}
	return procstat.RSSKB(n.Pid())
}

// signal sends sig to every running node (the profile window's marks).
func (f *fleet) signal(sig syscall.Signal) {
	for _, m := range f.nodes {
		if n := m.get(); n != nil && n.Pid() > 0 {
			_ = syscall.Kill(n.Pid(), sig)
		}
	}
}

// cpuSeconds is node i's user+system CPU time so far.
func (f *fleet) cpuSeconds(i int) float64 {
	n := f.nodes[i].get()
	if n == nil {
		return 0
	}
	v, _ := procstat.CPUSeconds(n.Pid())
	return v
}

// panics is the log lines of every node (every run) that report a panic
// or a fatal runtime error.
func (f *fleet) panics() []string {
	var out []string
	for _, m := range f.nodes {
		logs, _ := filepath.Glob(filepath.Join(m.dir, "node.log*"))
		for _, p := range logs {
			b, _ := os.ReadFile(p)
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") {
					out = append(out, fmt.Sprintf("node %d: %s", m.i, l))
				}
			}
		}
	}
	return out
}

// poll calls f until it returns nil, ctx ends or within passes (then the
// last error). It waits 50 ms between calls.
func poll(ctx context.Context, within time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", within, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// forAll runs f for every index in set, at most par at a time, and
// returns the first error (in set's order).
func forAll(set []int, par int, f func(i int) error) error {
	errs := make([]error, len(set))
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for k, i := range set {
		wg.Add(1)
		sem <- struct{}{}
		go func(k, i int) {
			defer wg.Done()
			defer func() { <-sem }()
			errs[k] = f(i)
		}(k, i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
