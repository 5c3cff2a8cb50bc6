package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"

	"peerdns/messages"
)

// domainEntry is one item of GET /api/resolved-domains (the fields the
// table shows; --json passes the node's objects through whole).
type domainEntry struct {
	Domain          string            `json:"domain"`
	Hash            string            `json:"hash"`
	IsLocal         bool              `json:"isLocal"`
	IsOwner         bool              `json:"isOwner"`
	ConsensusStatus string            `json:"consensusStatus"`
	Services        []json.RawMessage `json:"services"`
}

func (e *env) domains(pos []string, ssl bool, only func(...string) error) error {
	if len(pos) == 0 {
		if err := only(); err != nil {
			return err
		}
		return e.listDomains()
	}
	sub, args := pos[0], pos[1:]
	flags := []string{}
	if sub == "add" {
		flags = append(flags, "ssl")
	}
	if err := only(flags...); err != nil {
		return err
	}
	switch sub {
	case "add":
		if len(args) != 2 {
			return fail(ExitUsage, "usage: peerdns domains add DOMAIN HASH [--ssl]")
		}
		if err := e.c.post("/api/add-domain", map[string]any{"domain": args[0], "hash": args[1], "ssl": ssl}, nil); err != nil {
			return err
		}
		return e.done("added", args[0])
	case "remove":
		if len(args) != 1 {
			return fail(ExitUsage, "usage: peerdns domains remove DOMAIN")
		}
		if err := e.c.post("/api/remove-domain", map[string]any{"domain": args[0]}, nil); err != nil {
			return err
		}
		return e.done("removed", args[0])
	case "show":
		if len(args) != 1 {
			return fail(ExitUsage, "usage: peerdns domains show DOMAIN")
		}
		return e.showDomain(args[0])
	}
	return fail(ExitUsage, "unknown domains command %q (add, remove, show)", sub)
}

// done reports a write: a line for people, {"ok":true,...} for scripts.
func (e *env) done(what, name string) error {
	if e.json {
		return e.printJSON(map[string]any{"ok": true, "action": what, "name": name})
	}
	_, err := fmt.Fprintf(e.stdout, "%s %s\n", what, name)
	return err
}

func (e *env) listDomains() error {
	var raw []json.RawMessage
	if err := e.c.getJSON("/api/resolved-domains", &raw); err != nil {
		return err
	}
	if e.json {
		return e.printJSON(raw)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "DOMAIN\tSTATUS\tOWNER\tSERVICES\tHASH")
	for _, r := range raw {
		var d domainEntry
		if err := json.Unmarshal(r, &d); err != nil {
			return fail(ExitNoNode, "%s answered /api/resolved-domains with an unexpected item: %v", e.c.addr, err)
		}
		owner := "-"
		switch {
		case d.IsOwner:
			owner = "this node"
		case d.IsLocal:
			owner = "claimed here, lost"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", cell(d.Domain), cell(d.ConsensusStatus), owner, len(d.Services), cell(d.Hash))
	}
	return w.Flush()
}

// shownDomain is `domains show --json`: the domain's entry (null when no
// node resolves it), its consensus state and its services.
type shownDomain struct {
	Domain    string            `json:"domain"`
	Entry     json.RawMessage   `json:"entry"`
	Consensus json.RawMessage   `json:"consensus"`
	Services  []json.RawMessage `json:"services"`
}

// consensusSegment is name as the {domain} segment of
// /api/consensus/{domain}. The admin API's literal paths
// /api/consensus/status and /api/consensus/metrics win over {domain}
// and its router matches the path as sent, so a domain named like one
// has its first letter percent-encoded: the node unescapes the segment
// and asks for the domain.
func consensusSegment(name string) string {
	seg := url.PathEscape(name)
	if seg == "status" || seg == "metrics" {
		seg = fmt.Sprintf("%%%02X", seg[0]) + seg[1:]
	}
	return seg
}

func (e *env) showDomain(name string) error {
	var list []json.RawMessage
	if err := e.c.getJSON("/api/resolved-domains", &list); err != nil {
		return err
	}
	out := shownDomain{Domain: name, Entry: json.RawMessage("null")}
	var entry domainEntry
	for _, r := range list {
		var d domainEntry
		if json.Unmarshal(r, &d) == nil && strings.EqualFold(d.Domain, name) {
			out.Entry, entry = r, d
		}
	}
	var cs messages.ConsensusState
	if err := e.c.getJSON("/api/consensus/"+consensusSegment(name), &out.Consensus); err != nil {
		return err
	}
	_ = json.Unmarshal(out.Consensus, &cs)
	if entry.Domain == "" && (cs.Status == "no_claims" || cs.Status == "") {
		return fail(ExitNotFound, "no domain %q: no claim for it in the ledger", name)
	}
	if err := e.c.getJSON("/api/domain-services?domain="+url.QueryEscape(name), &out.Services); err != nil {
		return err
	}
	if out.Services == nil {
		out.Services = []json.RawMessage{}
	}
	if e.json {
		return e.printJSON(out)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	kv := func(k string, v any) { fmt.Fprintf(w, "%s\t%s\n", k, cell(v)) }
	kv("domain", name)
	kv("consensus", cs.Status)
	if cs.Error != "" {
		kv("error", cs.Error)
	}
	if cs.Hash != nil {
		kv("hash", *cs.Hash)
	}
	if cs.ResolvedClaimant != nil {
		kv("claimant", *cs.ResolvedClaimant)
	}
	kv("owned here", entry.IsOwner)
	kv("quorum", fmt.Sprintf("%d votes, %d needed, %d active peers, met: %v", cs.TotalVotes, cs.MinVotes, cs.ActivePeers, cs.QuorumMet))
	if err := w.Flush(); err != nil {
		return err
	}
	if len(cs.VoteCounts) > 0 {
		fmt.Fprintln(e.stdout)
		w = tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "CLAIMANT\tVOTES")
		ids := make([]string, 0, len(cs.VoteCounts))
		for id := range cs.VoteCounts {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			fmt.Fprintf(w, "%s\t%d\n", cell(id), cs.VoteCounts[id])
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(out.Services) > 0 {
		fmt.Fprintln(e.stdout)
		w = tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "SERVICE\tPORT\tPROTOCOL\tKEY")
		for _, r := range out.Services {
			var s struct {
				ServiceName string `json:"serviceName"`
				Key         string `json:"key"`
				Port        int    `json:"port"`
				Protocol    string `json:"protocol"`
			}
			_ = json.Unmarshal(r, &s)
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", cell(s.ServiceName), s.Port, cell(s.Protocol), cell(s.Key))
		}
		return w.Flush()
	}
	return nil
}
