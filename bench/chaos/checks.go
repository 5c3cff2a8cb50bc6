//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
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
		sort.Strings(lost)
		if len(lost) > 0 {
			bad = append(bad, fmt.Sprintf("node %d: %d acknowledged local records lost (e.g. %s)", n.i, len(lost), lost[0]))
		}
		if len(wrong) > 0 {
			bad = append(bad, fmt.Sprintf("node %d: %d local records with an older value (e.g. %s)", n.i, len(wrong), wrong[0]))
		}
		if len(back) > 0 {
			bad = append(bad, fmt.Sprintf("node %d: %d acknowledged local record deletes undone (e.g. %s)", n.i, len(back), back[0]))
		}
	}
	return bad
}

// dnsAgree asks every node's DNS, once the views agree, for a sample of
// the acknowledged claims (each must answer an address), the removed
// ones (none may answer) and the local records (their last value), and
// records what disagrees as DNS findings.
func dnsAgree(nodes []*node, want map[string]string, removed map[string]bool, rec *record) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
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
	HeapKB     int // Go heap in use (go_memstats_heap_inuse_bytes)
}

func (l levels) String() string {
	return fmt.Sprintf("%dg/%dM/%dM", l.Goroutines, l.RSSKB>>10, l.HeapKB>>10)
}

// levels reads every node's goroutines and heap from its /metrics and
// its RSS from /proc.
func (c *cluster) levels() []levels {
	var out []levels
	for _, n := range c.nodes {
		l := levels{RSSKB: n.rssKB()}
		if code, body, err := n.call("GET", "/metrics", ""); err == nil && code == 200 {
			sc := bufio.NewScanner(strings.NewReader(body))
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				name, v, ok := strings.Cut(sc.Text(), " ")
				if !ok {
					continue
				}
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					continue
				}
				switch name {
				case "go_goroutines":
					l.Goroutines = int(f)
				case "go_memstats_heap_inuse_bytes":
					l.HeapKB = int(f) >> 10
				}
			}
		}
		out = append(out, l)
	}
	return out
}

// The level bound: once the nemesis stopped, each node's goroutines come
// back within goroutineSlack (a share of before, plus a few) of what
// they were before it started, and its heap in use within heapSlack of
// before plus heapPerOp for every write of the run (the ledger and the
// local records keep what was written: a node holds more data at the end
// than at the start). They have levelSettle to get there.
const (
	goroutineShare = 0.25
	goroutineFew   = 30
	heapShare      = 1.0
	heapFewKB      = 16 << 10
	heapPerOpKB    = 8
	levelSettle    = 30 * time.Second
)

// levelsExceed says which node is above the bound.
func levelsExceed(before, after []levels, writes int) []string {
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
		if lim := int(float64(b.HeapKB)*(1+heapShare)) + heapFewKB + heapPerOpKB*writes; a.HeapKB > lim {
			out = append(out, fmt.Sprintf("node %d: heap %d MiB, %d MiB before (bound %d MiB for %d writes)", i, a.HeapKB>>10, b.HeapKB>>10, lim>>10, writes))
		}
	}
	return out
}
