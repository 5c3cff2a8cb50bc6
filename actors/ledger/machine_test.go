package ledger

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"peerdns/messages"
)

// The scheduling machine driven by scripts (testdata/machine/*.txt), in
// the manner of etcd raft's interaction tests: no actor system, no
// clock, no timing. Each block of a script is
//
//	# comments
//	<time> <command> [args]
//	----
//	<the Output, one line per effect; empty when nothing>
//
// separated by a blank line. <time> is the machine's now, as an offset
// from the script's start (e.g. 0ms, 12ms, 1s). Commands:
//
//	domain NAME v=N [claimed] [needs-vote]  the ledger view: NAME exists at version N
//	drop NAME                               the ledger view: NAME has no claims or votes
//	touch NAME...                           Touch
//	recalc NAME...                          Recalc
//	wait NAME:REPLY...                      Wait, one group ("*" is everything)
//	queue-claim NAME                        QueueClaim of NAME
//	queue-ops FROM                          QueueOps of a peer FROM
//	queue-vote NAME v=N [e=N] [hold=DUR]    QueueVote at evalKey{N, e}, one vote write, held DUR
//	votes-committed NAME... [failed]        VotesCommitted
//	settled NAME | restarted NAME           Settled | Restarted
//	stale NAME                              Stale
//	fire KIND [stale]                       Fired (claims, votes, ops, eval, publish); a claims
//	                                        timer is the live one, or with stale the one before
//	changed | changed-now | read            Changed{} | Changed{Now: true} | Read
//	round [e=N]                             Round at epoch N (default 0)
//
// Output lines: retire/assign/evaluate (sorted by domain: a round walks a
// map), publish, reply (in waiter order), commit claims NAMES, commit
// votes NAMES (N writes), apply ops FROMS, timer KIND now|+DELAY, idle.
//
// go test ./actors/ledger/ -run TestMachineScripts -update rewrites the
// expected outputs (review the diff: it is the behaviour).

var update = flag.Bool("update", false, "rewrite the expected outputs of testdata/machine scripts")

// scriptLedger is the ledger view a script sets with domain and drop.
type scriptLedger map[string]scriptDomain

type scriptDomain struct {
	version           uint64
	claimed, needVote bool
}

func (l scriptLedger) domain(name string) (uint64, bool, bool) {
	d, ok := l[name]
	return d.version, ok, d.claimed
}

func (l scriptLedger) needsVote(name string) bool { return l[name].needVote }

func TestMachineScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "machine", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata/machine: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

func runScript(t *testing.T, file string) {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// Gaps as the defaults: claims 10 ms, votes 30 ms, evaluations 20 ms,
	// publishes 20 ms.
	m := newMachine(DefaultClaimGap, DefaultVoteGap, DefaultEvalGap, publishGap)
	l := scriptLedger{}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var rewritten strings.Builder
	blocks := strings.Split(strings.TrimSpace(string(raw)), "\n\n")
	for i, block := range blocks {
		lines := strings.Split(block, "\n")
		var comments []string
		for len(lines) > 0 && strings.HasPrefix(lines[0], "#") {
			comments = append(comments, lines[0])
			lines = lines[1:]
		}
		if len(lines) == 0 { // a block of comments only
			rewritten.WriteString(strings.Join(comments, "\n"))
			rewritten.WriteString("\n\n")
			continue
		}
		if len(lines) < 2 || lines[1] != "----" {
			t.Fatalf("%s block %d: want a command and ----, got %q", file, i+1, block)
		}
		cmd, want := lines[0], strings.Join(lines[2:], "\n")
		got := strings.Join(runCommand(t, m, l, start, cmd), "\n")
		if got != want && !*update {
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", file, cmd, indent(got), indent(want))
		}
		for _, c := range comments {
			rewritten.WriteString(c + "\n")
		}
		rewritten.WriteString(cmd + "\n----\n")
		if got != "" {
			rewritten.WriteString(got + "\n")
		}
		rewritten.WriteString("\n")
	}
	if *update {
		if err := os.WriteFile(file, []byte(strings.TrimRight(rewritten.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func indent(s string) string {
	if s == "" {
		return "  (nothing)"
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// runCommand runs one script line and formats what the machine answered.
func runCommand(t *testing.T, m *machine, l scriptLedger, start time.Time, line string) []string {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 2 {
		t.Fatalf("bad line %q: want <time> <command>", line)
	}
	at, err := time.ParseDuration(f[0])
	if err != nil {
		t.Fatalf("bad time in %q: %v", line, err)
	}
	now := start.Add(at)
	cmd, args := f[1], f[2:]
	num := func(prefix string, def uint64) uint64 {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, prefix+"="); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatalf("bad %s in %q", prefix, line)
				}
				return n
			}
		}
		return def
	}
	has := func(word string) bool {
		for _, a := range args {
			if a == word {
				return true
			}
		}
		return false
	}
	names := func() []string {
		var out []string
		for _, a := range args {
			if !strings.Contains(a, "=") && a != "failed" && a != "claimed" && a != "needs-vote" {
				out = append(out, a)
			}
		}
		return out
	}
	var in any
	switch cmd {
	case "domain":
		l[args[0]] = scriptDomain{version: num("v", 0), claimed: has("claimed"), needVote: has("needs-vote")}
		return nil
	case "drop":
		delete(l, args[0])
		return nil
	case "wait-limit":
		d, err := time.ParseDuration(args[0])
		if err != nil {
			t.Fatalf("bad wait limit in %q", line)
		}
		m.waitLimit = d
		return nil
	case "touch":
		in = Touch{Domains: names()}
	case "recalc":
		in = Recalc{Domains: names()}
	case "wait":
		var w Wait
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "since="); ok {
				d, err := time.ParseDuration(v)
				if err != nil {
					t.Fatalf("bad since in %q: %v", line, err)
				}
				w.Since = start.Add(d)
				continue
			}
			d, r, ok := strings.Cut(a, ":")
			if !ok {
				t.Fatalf("bad waiter %q in %q: want NAME:REPLY", a, line)
			}
			if d == "*" {
				d = ""
			}
			w.Domains, w.Replies = append(w.Domains, d), append(w.Replies, r)
		}
		in = w
	case "queue-claim":
		in = QueueClaim{Claim: queuedClaim{name: args[0]}}
	case "queue-ops":
		in = QueueOps{Ops: queuedOps{m: &messages.ApplyOps{From: args[0]}}}
	case "queue-vote":
		qv := QueueVote{Domain: args[0], Key: evalKey{num("v", 0), num("e", 0)},
			Votes: []write{{key: messages.VoteKey(args[0], "self", "peer"), value: messages.VoteMarker}}}
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "hold="); ok {
				if qv.Hold, err = time.ParseDuration(v); err != nil {
					t.Fatalf("bad hold in %q: %v", line, err)
				}
			}
		}
		in = qv
	case "votes-committed":
		in = VotesCommitted{Domains: names(), Failed: has("failed")}
	case "settled":
		in = Settled{Domain: args[0]}
	case "restarted":
		in = Restarted{Domain: args[0]}
	case "stale":
		in = Stale{Domain: args[0]}
	case "fire":
		kinds := map[string]timerKind{"claims": timerClaims, "votes": timerVotes, "ops": timerOps, "eval": timerEval, "publish": timerPublish, "retry": timerRetry}
		k, ok := kinds[args[0]]
		if !ok {
			t.Fatalf("bad timer in %q", line)
		}
		in = Fired{Kind: k, Gen: m.claimGen}
		if has("stale") {
			in = Fired{Kind: k, Gen: m.claimGen - 1}
		}
	case "changed":
		in = Changed{}
	case "changed-now":
		in = Changed{Now: true}
	case "read":
		in = Read{}
	case "round":
		in = Round{Ledger: l, Epoch: num("e", 0)}
	default:
		t.Fatalf("unknown command in %q", line)
	}
	return formatOutput(m.Step(in, now))
}

func formatOutput(out Output) []string {
	var lines []string
	sorted := func(s []string) []string {
		s = append([]string(nil), s...)
		sort.Strings(s)
		return s
	}
	for _, d := range sorted(out.Retire) {
		lines = append(lines, "retire "+d)
	}
	for _, d := range sorted(out.Assign) {
		lines = append(lines, "assign "+d)
	}
	evs := append([]EvalRequest(nil), out.Evaluate...)
	sort.Slice(evs, func(i, j int) bool { return evs[i].Domain < evs[j].Domain })
	for _, e := range evs {
		s := fmt.Sprintf("evaluate %s v=%d e=%d", e.Domain, e.Key.version, e.Key.epoch)
		if e.Recalc {
			s += " recalc"
		}
		lines = append(lines, s)
	}
	if out.Publish {
		lines = append(lines, "publish")
	}
	for _, r := range out.Replies {
		lines = append(lines, fmt.Sprintf("reply %v", r))
	}
	if len(out.Claims) > 0 {
		var names []string
		for _, c := range out.Claims {
			names = append(names, c.name)
		}
		lines = append(lines, "commit claims "+strings.Join(names, " "))
	}
	if len(out.Votes) > 0 || len(out.Commit) > 0 {
		lines = append(lines, fmt.Sprintf("commit votes %s (%d writes)", strings.Join(out.Commit, " "), len(out.Votes)))
	}
	if len(out.Ops) > 0 {
		var from []string
		for _, o := range out.Ops {
			from = append(from, o.m.From)
		}
		lines = append(lines, "apply ops "+strings.Join(from, " "))
	}
	for _, tm := range out.Timers {
		when := "now"
		if tm.After > 0 {
			when = "+" + tm.After.String()
		}
		lines = append(lines, "timer "+tm.Kind.String()+" "+when)
	}
	if out.Idle {
		lines = append(lines, "idle")
	}
	return lines
}
