//go:build linux

package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/miekg/dns"

	"peerdns/bench/promtext"
)

// checkLocal compares each node's local records with what the workload
// wrote there: every name whose last write was acknowledged holds that
// value (or is absent after an acknowledged delete). Names whose last
// write has an unknown outcome are left out.
func checkLocal(nodes []*node, rec *record) []string {
	var bad []string
	for _, n := range nodes {
		recs, err := n.localRecords()
		if err != nil {
			bad = append(bad, fmt.Sprintf("node %d: local records: %v", n.i, err))
			continue
		}
		have := map[string]string{}
		for _, r := range recs {
			if r.Type == "A" {
				have[r.Name] = r.Data
			}
		}
		var lost, wrong, back []string
		rec.mu.Lock()
		for name, lr := range rec.local[n.i] {
			if lr.uncertain || !lr.ackedAny {
				continue
			}
			got, ok := have[name]
			switch {
			case lr.acked == "" && ok:
				back = append(back, name)
			case lr.acked != "" && !ok:
				lost = append(lost, name)
			case lr.acked != "" && got != lr.acked:
				wrong = append(wrong, fmt.Sprintf("%s=%s, want %s", name, got, lr.acked))
			}
		}
		rec.mu.Unlock()
		bad = append(bad, nodeFindings(n.i,
			finding{lost, "acknowledged local records lost"},
			finding{wrong, "local records with an older value"},
			finding{back, "acknowledged local record deletes undone"})...)
	}
	return bad
}

// dnsAgree asks every node's DNS, once the views agree, for a sample of
// the acknowledged claims (each must answer an address), the removed
// ones (none may answer) and the local records (their last value), and
// records what disagrees as DNS findings.
func dnsAgree(ctx context.Context, nodes []*node, want map[string]string, removed map[string]bool, rec *record) {
	sample := func(m map[string]bool, k int) []string {
		var out []string
		for d := range m {
			out = append(out, d)
		}
		sort.Strings(out)
		if len(out) > k {
			step := len(out) / k
			var s []string
			for i := 0; i < len(out); i += step {
				s = append(s, out[i])
			}
			out = s
		}
		return out
	}
	wantSet := map[string]bool{}
	for d := range want {
		wantSet[d] = true
	}
	cl := &dns.Client{Timeout: 2 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, n := range nodes {
		note := func(s string) {
			rec.mu.Lock()
			bad(&rec.dnsBad, fmt.Sprintf("node %d after convergence: %s", n.i, s))
			rec.mu.Unlock()
		}
		for _, d := range sample(wantSet, 20) {
			if ips, err := n.queryA(ctx, cl, d); err == nil && len(ips) == 0 {
				note(d + " is resolved in the view, DNS answers no address")
			}
		}
		for _, d := range sample(removed, 20) {
			if ips, err := n.queryA(ctx, cl, d); err == nil && len(ips) > 0 {
				note(fmt.Sprintf("%s was removed, DNS answers %v", d, ips))
			}
		}
		rec.mu.Lock()
		last := map[string]string{}
		for name, lr := range rec.local[n.i] {
			if !lr.uncertain && lr.ackedAny {
				last[name] = lr.acked
			}
		}
		rec.mu.Unlock()
		names := map[string]bool{}
		for name := range last {
			names[name] = true
		}
		for _, name := range sample(names, 20) {
			ips, err := n.queryA(ctx, cl, name)
			if err != nil {
				continue
			}
			switch {
			case last[name] == "" && len(ips) > 0:
				note(fmt.Sprintf("local record %s was deleted, DNS answers %v", name, ips))
			case last[name] != "" && (len(ips) != 1 || ips[0] != last[name]):
				note(fmt.Sprintf("local record %s is %s, DNS answers %v", name, last[name], ips))
			}
		}
	}
}

// levels are one node's process figures.
type levels struct {
	Goroutines int
	RSSKB      int
	// LiveKB is the Go heap live after the last collection: the next
	// collection's target (go_memstats_next_gc_bytes) divided by
	// 1+GOGC/100 (go_gc_gogc_percent, 100 when absent). Unlike the heap
	// in use or the RSS it does not count garbage not yet collected nor
	// memory the runtime has not yet returned.
	LiveKB int
}

func (l levels) String() string {
	return fmt.Sprintf("%dg/%dM/%dM", l.Goroutines, l.RSSKB>>10, l.LiveKB>>10)
}

// levels reads every node's goroutines and live heap from its /metrics
// and its RSS from /proc.
func (c *cluster) levels() []levels {
	var out []levels
	for _, n := range c.nodes {
		out = append(out, n.levels())
	}
	return out
}

func (n *node) levels() levels {
	l := levels{RSSKB: n.rssKB()}
	code, body, err := n.call("GET", "/metrics", "")
	if err != nil || code != 200 {
		return l
	}
	v, err := promtext.Values(body, "go_goroutines", "go_memstats_next_gc_bytes", "go_gc_gogc_percent")
	if err != nil {
		return l
	}
	l.Goroutines = int(v["go_goroutines"])
	nextGC, gogc := v["go_memstats_next_gc_bytes"], 100.0
	if g := v["go_gc_gogc_percent"]; g > 0 {
		gogc = g
	}
	l.LiveKB = int(nextGC/(1+gogc/100)) >> 10
	return l
}

// The level bounds. Goroutines: once the nemesis stopped, each node's
// come back within 1.25x + 30 of what they were before it started (the
// same workload runs at both moments: sessions, tunnel connections,
// subscribers); they have levelSettle to get there. Memory: the node
// holds more data at the end than at the start (every claim, vote and
// local record written), so its level is that of the same node started
// afresh on the same data: one node (the one with the largest live heap)
// is restarted once the others were measured, and every node's live
// heap after the nemesis must be within 1.5x + 16 MiB of that fresh
// process's, under the same workload.
const (
	goroutineShare = 0.25
	goroutineFew   = 30
	liveShare      = 0.5
	liveFewKB      = 16 << 10
	levelSettle    = 30 * time.Second
)

// goroutinesExceed says which node has more goroutines than the bound.
func goroutinesExceed(before, after []levels) []string {
	var out []string
	for i := range before {
		if i >= len(after) {
			break
		}
		b, a := before[i], after[i]
		if a.Goroutines == 0 || b.Goroutines == 0 {
			out = append(out, fmt.Sprintf("node %d: no goroutine count", i))
			continue
		}
		if lim := int(float64(b.Goroutines)*(1+goroutineShare)) + goroutineFew; a.Goroutines > lim {
			out = append(out, fmt.Sprintf("node %d: %d goroutines, %d before (bound %d)", i, a.Goroutines, b.Goroutines, lim))
		}
	}
	return out
}

// heapExceeds says which node's live heap is above the bound set by the
// fresh process's.
func heapExceeds(after []levels, fresh levels) []string {
	var out []string
	lim := int(float64(fresh.LiveKB)*(1+liveShare)) + liveFewKB
	for i, a := range after {
		if a.LiveKB == 0 {
			out = append(out, fmt.Sprintf("node %d: no heap figure", i))
		} else if a.LiveKB > lim {
			out = append(out, fmt.Sprintf("node %d: live heap %d MiB, a fresh node on the same data %d MiB (bound %d MiB)", i, a.LiveKB>>10, fresh.LiveKB>>10, lim>>10))
		}
	}
	return out
}

// finding is one kind of disagreement a check found on a node: the items
// and what they are.
type finding struct {
	items []string
	what  string
}

// nodeFindings words a node's findings, one line per kind found, each
// with its count and the first item in order as an example.
func nodeFindings(node int, fs ...finding) []string {
	var out []string
	for _, f := range fs {
		if len(f.items) == 0 {
			continue
		}
		sort.Strings(f.items)
		out = append(out, fmt.Sprintf("node %d: %d %s (e.g. %s)", node, len(f.items), f.what, f.items[0]))
	}
	return out
}
