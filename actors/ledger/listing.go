package ledger

import (
	"slices"

	"peerdns/actors/consensus"
	"peerdns/messages"
)

// listing is GET /api/resolved-domains as last built: its entries (the
// internal domains, then every other domain with claims, by name), their JSON,
// and the domains changed since.
//
// The listing is built in the ledger actor at the first read after a
// change, and during a burst of claims every read follows a change: with
// thousands of domains, building every entry and its JSON again for each
// read was a tenth of a follower's CPU in the five-node burst (the
// operator's and the benchmark's polls). So the domains whose claims,
// votes or evaluation changed are marked (changed), and the next build
// takes every other entry and its JSON from the last one as they are,
// building only the marked ones: a merge of the two sorted lists, the
// unchanged entries' JSON copied in runs. A change of the internal
// domains, or a reload of the ledger, builds it whole (ok false). What
// an entry shows comes only from its own domain's claims, votes and last
// evaluation, which mark it when they change.
type listing struct {
	entries  []messages.DomainEntry // shared read-only with readers: never modified
	json     []byte                 // the same, encoded (appendListing); never modified
	ends     []int                  // ends[i]: where entries[i]'s JSON ends in json
	internal int                    // how many entries at the front are internal domains
	ok       bool                   // entries are those of the last build (false: build whole)
	dirty    map[string]bool        // domains changed since the last build
}

// changed marks a domain whose entry may differ from the last build.
func (l *listing) changed(name string) {
	if !l.ok {
		return // the next build is whole anyway
	}
	if l.dirty == nil {
		l.dirty = map[string]bool{}
	}
	l.dirty[name] = true
}

// domainListing is the resolved-domains listing, built again only after a
// change; the slice is shared read-only with every reader.
func (a *Actor) domainListing() []messages.DomainEntry {
	l := &a.list
	switch {
	case l.ok && len(l.dirty) == 0:
		return l.entries
	case l.ok:
		a.patchListing()
	default:
		a.buildListing()
	}
	l.ok = true
	clear(l.dirty)
	return l.entries
}

// buildListing builds every entry.
func (a *Actor) buildListing() {
	l := &a.list
	n := len(a.internal) + len(a.st.domains)
	entries := make([]messages.DomainEntry, 0, n)
	for _, name := range sortedKeys(a.internal) {
		entries = append(entries, messages.DomainEntry{Domain: name, Hash: consensus.Internal, ConsensusStatus: consensus.Internal, Services: []messages.Service{}})
	}
	internal := len(entries)
	for _, name := range sortedKeys(a.st.domains) {
		if e, ok := a.listEntry(name); ok {
			entries = append(entries, e)
		}
	}
	js, ends := appendListing(make([]byte, 0, len(l.json)), entries, make([]int, 0, len(entries)))
	*l = listing{entries: entries, json: js, ends: ends, internal: internal, dirty: l.dirty}
}

// patchListing builds the marked domains' entries and takes the others
// from the last build.
func (a *Actor) patchListing() {
	l := &a.list
	names := make([]string, 0, len(l.dirty))
	for name := range l.dirty {
		names = append(names, name)
	}
	slices.Sort(names)
	old := l.entries
	entries := make([]messages.DomainEntry, 0, len(old)+len(names))
	ends := make([]int, 0, cap(entries))
	js := make([]byte, 0, len(l.json)+len(l.json)/max(len(old), 1)*len(names))
	js = append(js, '[')
	// copyRun appends old entries [from, to) and their JSON as one piece.
	copyRun := func(from, to int) {
		if from == to {
			return
		}
		start := 1 // after '['
		if from > 0 {
			start = l.ends[from-1] + 1 // after the comma
		}
		if len(entries) > 0 {
			js = append(js, ',')
		}
		shift := len(js) - start
		js = append(js, l.json[start:l.ends[to-1]]...)
		entries = append(entries, old[from:to]...)
		for _, e := range l.ends[from:to] {
			ends = append(ends, e+shift)
		}
	}
	copyRun(0, l.internal)
	i, run := l.internal, l.internal
	for _, name := range names {
		for i < len(old) && old[i].Domain < name {
			i++
		}
		copyRun(run, i)
		if i < len(old) && old[i].Domain == name {
			i++
		}
		run = i
		if e, ok := a.listEntry(name); ok {
			if len(entries) > 0 {
				js = append(js, ',')
			}
			entries = append(entries, e)
			js = appendEntry(js, &entries[len(entries)-1])
			ends = append(ends, len(js))
		}
	}
	copyRun(run, len(old))
	js = append(js, ']')
	*l = listing{entries: entries, json: js, ends: ends, internal: l.internal, dirty: l.dirty}
}

// listEntry is name's entry; false for a domain without claims, and for
// an internal domain (listed with the internal ones: the node answers it
// itself, whatever claims a peer wrote on it).
func (a *Actor) listEntry(name string) (messages.DomainEntry, bool) {
	idx := a.st.domains[name]
	if idx == nil || len(idx.claims) == 0 {
		return messages.DomainEntry{}, false
	}
	if _, internal := a.internal[name]; internal {
		return messages.DomainEntry{}, false
	}
	cs := a.consensusState(name)
	mine, isLocal := a.st.claim(name, a.st.self)
	e := messages.DomainEntry{Domain: name, IsLocal: isLocal, ConsensusState: &cs, ConsensusStatus: cs.Status, Services: []messages.Service{}}
	switch {
	case cs.Status == consensus.Resolved:
		e.Hash = *cs.Hash
		e.IsOwner = *cs.ResolvedClaimant == a.st.self
		if isLocal && !e.IsOwner {
			e.ConsensusStatus = consensus.Conflict
		}
		if rec, ok := a.st.claim(name, *cs.ResolvedClaimant); ok {
			e.Services, e.Clients = rec.Services, rec.Clients
		}
	case isLocal:
		e.Hash = mine.Hash
		e.Services, e.Clients = mine.Services, mine.Clients
	default:
		e.Hash = earliestHash(a.st, name)
	}
	return e, true
}
