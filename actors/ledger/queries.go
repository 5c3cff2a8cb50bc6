package ledger

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"peerdns/actors/consensus"
	"peerdns/messages"
)

// consensusState renders a domain's last evaluation as the spec's object.
func (a *Actor) consensusState(name string) messages.ConsensusState {
	r := a.results[name]
	if r == nil {
		// Not evaluated yet (or no claims): compute the numbers directly.
		st := consensus.Compute(consensus.Restrict(a.st.input(name, a.activeSet()), a.members().Replicas(name)))
		return toWire(st, 0)
	}
	return toWire(r.State, r.LastResolution)
}

func toWire(st consensus.State, lastRes int64) messages.ConsensusState {
	out := messages.ConsensusState{
		Status: st.Status, VoteCounts: st.VoteCounts, ActivePeers: st.ActivePeers,
		QuorumMet: st.QuorumMet, MinVotes: st.MinVotes, TotalVotes: st.TotalVotes, Error: st.Error,
	}
	if out.VoteCounts == nil {
		out.VoteCounts = map[string]int{}
	}
	if st.Status == consensus.Resolved {
		h, c := st.Hash, st.ResolvedClaimant
		out.Hash, out.ResolvedClaimant = &h, &c
	}
	if lastRes > 0 {
		out.LastResolution = &lastRes
	}
	return out
}

func (a *Actor) consensusOf(domain string) *messages.GetConsensusReply {
	name, err := messages.NormalizeDomain(domain)
	if err != nil {
		return &messages.GetConsensusReply{Err: err}
	}
	if _, internal := a.internal[name]; internal {
		return &messages.GetConsensusReply{Err: fmt.Errorf("%w: %s is an internal domain", messages.ErrInvalid, name)}
	}
	return &messages.GetConsensusReply{State: a.consensusState(name)}
}

// earliestHash is the hash shown for an unresolved domain we don't claim:
// the claim auto-voting would pick.
func earliestHash(s *state, name string) string {
	in := s.input(name, nil)
	if c, ok := consensus.Earliest(in.Claims); ok {
		return c.Hash
	}
	return ""
}

func (a *Actor) entries() []messages.LedgerEntry {
	var out []messages.LedgerEntry
	for _, name := range sortedKeys(a.st.domains) {
		idx := a.st.domains[name]
		for _, w := range sortedKeys(idx.claims) {
			out = append(out, messages.LedgerEntry{Key: idx.claims[w].Key(), Value: idx.records[w].Hash})
		}
		votes := slices.SortedFunc(maps.Keys(idx.votes), voteOf.compare)
		for _, k := range votes {
			out = append(out, messages.LedgerEntry{Key: idx.votes[k].Key(), Value: idx.votes[k].Value()})
		}
	}
	if out == nil {
		out = []messages.LedgerEntry{}
	}
	return out
}

func (a *Actor) conflicts() []messages.P2PConflict {
	out := []messages.P2PConflict{}
	for _, name := range sortedKeys(a.results) {
		r := a.results[name]
		mine, ok := a.st.claim(name, a.st.self)
		if !ok || r.State.Status != consensus.Resolved || r.State.ResolvedClaimant == a.st.self {
			continue
		}
		pref := a.hashPref[name]
		if pref == "" {
			pref = "resolved"
		}
		out = append(out, messages.P2PConflict{
			Domain: name, LocalHash: mine.Hash, ResolvedHash: r.State.Hash,
			ResolvedClaimant: r.State.ResolvedClaimant, LocalClaimant: a.st.self,
			ConsensusStatus: consensus.Conflict, HashPreference: pref,
		})
	}
	return out
}

func (a *Actor) sidecar() messages.SidecarStatus {
	st := messages.SidecarStatus{
		Open: a.d.Ledger.Health() == nil, Ready: a.bootstrap, Writable: a.writable(), BootstrapComplete: a.bootstrap,
		EventCount: a.st.length, DomainCount: a.domainCount(), IndexedLength: a.st.length, Length: a.st.length,
	}
	if a.lastApplyAt > 0 {
		t := a.lastApplyAt
		st.LastApplyAt = &t
	}
	if a.st.network != "" {
		k := a.st.network
		st.Key = &k
	}
	return st
}

func (a *Actor) domainCount() int {
	n := 0
	for _, idx := range a.st.domains {
		if len(idx.claims) > 0 {
			n++
		}
	}
	return n
}

func (a *Actor) metrics() messages.ConsensusMetrics {
	m := messages.ConsensusMetrics{
		Resolutions: a.counts.resolutions, QuorumFailures: a.counts.quorumFailures, Ties: a.counts.ties,
		ValidationFailures: a.validFail, Sidecar: a.sidecar(), BootstrapComplete: a.bootstrap,
		DomainResolutions: []messages.DomainResolutionCount{},
	}
	for _, name := range sortedKeys(a.results) {
		r := a.results[name]
		m.TotalVotes += r.State.TotalVotes
		m.DomainResolutions = append(m.DomainResolutions, messages.DomainResolutionCount{Domain: name, Resolved: r.Resolved, Failed: r.Failed})
	}
	if n := len(a.results); n > 0 {
		m.AvgVotesPerDomain = float64(m.TotalVotes) / float64(n)
	}
	sort.Slice(m.DomainResolutions, func(i, j int) bool { return m.DomainResolutions[i].Domain < m.DomainResolutions[j].Domain })
	return m
}
