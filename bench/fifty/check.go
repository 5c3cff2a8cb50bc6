//go:build linux

package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// seen is one node's view of one domain, from GET /api/resolved-domains.
type seen struct {
	Status   string // consensusStatus, with conflict read as resolved
	Hash     string // the resolved hash ("" unless resolved)
	Claimant string // consensusState.resolvedClaimant ("" unless resolved)
}

func (s seen) String() string {
	if s.Status != "resolved" {
		return s.Status
	}
	return fmt.Sprintf("resolved %.12s… by %.8s", strings.TrimPrefix(s.Hash, "hs://"), s.Claimant)
}

// view reads node i's listing of the domains under prefix. "conflict"
// (this node holds a losing claim) is the same outcome as "resolved"
// seen from a node without a claim: both carry the winner's hash.
func (f *fleet) view(i int, prefix string) (map[string]seen, error) {
	var list []struct {
		Domain          string `json:"domain"`
		Hash            string `json:"hash"`
		ConsensusStatus string `json:"consensusStatus"`
		ConsensusState  *struct {
			ResolvedClaimant *string `json:"resolvedClaimant"`
		} `json:"consensusState"`
	}
	if err := f.getJSON(i, "/api/resolved-domains", &list); err != nil {
		return nil, err
	}
	out := make(map[string]seen, len(list))
	for _, d := range list {
		if !strings.HasPrefix(d.Domain, prefix) {
			continue
		}
		s := seen{Status: d.ConsensusStatus}
		if s.Status == "conflict" {
			s.Status = "resolved"
		}
		if s.Status == "resolved" {
			s.Hash = d.Hash
			if d.ConsensusState != nil && d.ConsensusState.ResolvedClaimant != nil {
				s.Claimant = *d.ConsensusState.ResolvedClaimant
			}
		}
		out[d.Domain] = s
	}
	return out, nil
}

// claims is what the run asked for: domain → the claims made on it.
type claims struct {
	mu   sync.Mutex
	by   map[string][]claim
	list []string        // domains in the order first claimed
	acks []time.Duration // each acknowledged request's round trip
}

// acked records an acknowledged request's round trip.
func (c *claims) acked(d time.Duration) {
	c.mu.Lock()
	c.acks = append(c.acks, d)
	c.mu.Unlock()
}

// ackTimes is the median and 90th percentile of the round trips
// recorded (zero without any).
func (c *claims) ackTimes() (p50, p90 time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.acks) == 0 {
		return 0, 0
	}
	a := slices.Sorted(slices.Values(c.acks))
	return a[len(a)/2], a[len(a)*9/10]
}

type claim struct {
	node int
	id   string // the claiming node's writer id
	hash string
}

func (c *claims) add(domain string, cl claim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string][]claim{}
	}
	if _, ok := c.by[domain]; !ok {
		c.list = append(c.list, domain)
	}
	c.by[domain] = append(c.by[domain], cl)
}

// check compares one node's view with the acknowledged claims: each
// domain with one claim is resolved to that claim (hash and claimant); a
// domain claimed on several nodes is resolved to one of them, or a tie
// (votes split evenly between them is a stable outcome of the rules;
// alike compares it across nodes). It returns what is not so yet.
func (c *claims) check(v map[string]seen) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing, wrong []string
	for _, d := range c.list {
		s, ok := v[d]
		if ok && s.Status == "tie" && len(c.by[d]) > 1 {
			continue
		}
		if !ok || s.Status != "resolved" {
			missing = append(missing, d)
			continue
		}
		match := false
		for _, cl := range c.by[d] {
			if cl.hash == s.Hash && cl.id == s.Claimant {
				match = true
			}
		}
		if !match {
			wrong = append(wrong, d+" ("+s.String()+")")
		}
	}
	switch {
	case len(wrong) > 0:
		return fmt.Errorf("%d of %d resolved to a claim never made there, e.g. %s", len(wrong), len(c.list), wrong[0])
	case len(missing) > 0:
		s := "absent"
		if v, ok := v[missing[0]]; ok {
			s = v.String()
		}
		return fmt.Errorf("%d of %d not resolved yet, e.g. %s (%s)", len(missing), len(c.list), missing[0], s)
	}
	return nil
}

// alike says whether every view holds the same outcome for every domain
// of c; else the first difference.
func (c *claims) alike(views map[int]map[string]seen) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var idx []int
	for i := range views {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, d := range c.list {
		first := views[idx[0]][d]
		for _, i := range idx[1:] {
			if s := views[i][d]; s != first {
				return fmt.Errorf("%s: node %d sees %v, node %d sees %v", d, idx[0], first, i, s)
			}
		}
	}
	return nil
}

// converge waits until every node in set resolves every claim of c and
// all of them alike. It returns when each node first held every claim
// (offsets from since; the slowest is the figure) and, on failure, what
// was still wrong.
// Each listing read's time goes to reads (nil: not kept).
func (f *fleet) converge(ctx context.Context, set []int, c *claims, prefix string, since time.Time, within time.Duration, reads *readTimes) (map[int]time.Duration, error) {
	var mu sync.Mutex
	doneAt := map[int]time.Duration{}
	views := map[int]map[string]seen{}
	err := poll(ctx, within, func() error {
		var todo []int
		mu.Lock()
		for _, i := range set {
			if _, ok := doneAt[i]; !ok {
				todo = append(todo, i)
			}
		}
		mu.Unlock()
		// Nodes that held every claim are not read again until all have
		// (their reads would only load the machine): a claim, once
		// resolved alike, stays so without a new write. The final pass
		// below reads them all again.
		reads.pass()
		err := forAll(todo, 8, func(i int) error {
			t0 := time.Now()
			v, err := f.view(i, prefix)
			reads.add(time.Since(t0))
			if err != nil {
				return fmt.Errorf("node %d: %w", i, err)
			}
			if err := c.check(v); err != nil {
				return fmt.Errorf("node %d: %w", i, err)
			}
			mu.Lock()
			doneAt[i] = time.Since(since)
			views[i] = v
			mu.Unlock()
			return nil
		})
		if err != nil {
			return err
		}
		// Every node had them all; one more read of every node, to compare
		// views taken together.
		all := map[int]map[string]seen{}
		err = forAll(set, 8, func(i int) error {
			v, err := f.view(i, prefix)
			if err != nil {
				return fmt.Errorf("node %d: %w", i, err)
			}
			if err := c.check(v); err != nil {
				mu.Lock()
				delete(doneAt, i)
				mu.Unlock()
				return fmt.Errorf("node %d again: %w", i, err)
			}
			mu.Lock()
			all[i] = v
			mu.Unlock()
			return nil
		})
		if err != nil {
			return err
		}
		return c.alike(all)
	})
	return doneAt, err
}

// slowest is the largest duration of m and its node.
func slowest(m map[int]time.Duration) (int, time.Duration) {
	who, d := -1, time.Duration(0)
	for i, t := range m {
		if t > d || who < 0 {
			who, d = i, t
		}
	}
	return who, d
}

// readTimes keeps how long the listing reads of a wait took: each read
// is a node's answer under the load being measured, and a node counts as
// done only when the read that showed it done came back, so they bound
// how fine the wait's figure is.
type readTimes struct {
	mu     sync.Mutex
	took   []time.Duration
	passes int
}

func (r *readTimes) pass() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.passes++
	r.mu.Unlock()
}

func (r *readTimes) add(d time.Duration) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.took = append(r.took, d)
	r.mu.Unlock()
}

// String is "N reads in P passes: median, p90 and max".
func (r *readTimes) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.took) == 0 {
		return "no reads"
	}
	s := append([]time.Duration(nil), r.took...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return fmt.Sprintf("%d reads in %d passes: median %.0f ms, p90 %.0f, max %.0f", len(s), r.passes, ms(s[len(s)/2]), ms(s[len(s)*9/10]), ms(s[len(s)-1]))
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
