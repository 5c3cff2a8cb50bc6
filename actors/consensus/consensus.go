// Package consensus holds the pure rules that pick a domain's resolved
// claimant from the ledger's claims and votes. It does no I/O and keeps no
// state; the domain actor calls it and caches the result.
//
// Rules (ARCHITECTURE.md, "Consensus per domain"):
//   - active peers = connected writers + self;
//   - only votes cast by active peers, for claimants that still have a
//     claim, are counted: an offline peer cannot vouch for anything now;
//   - minVotes = floor(activePeers/2)+1;
//   - no claims → no_claims; totalVotes < minVotes → insufficient_quorum;
//     the top count shared by several claimants → tie; else resolved.
package consensus

import (
	"sort"

	"peerdns/messages"
)

// Status values of a consensus computation.
const (
	Resolved           = "resolved"
	InsufficientQuorum = "insufficient_quorum"
	Tie                = "tie"
	NoClaims           = "no_claims"
	Error              = "error"
	// Listing-only statuses (the domain list, not ConsensusState).
	Conflict = "conflict"
	Internal = "internal"
)

// Claim is one claimant's claim on a domain.
type Claim struct {
	Writer string
	Hash   string
	SSL    bool
	HLC    messages.HLC
}

// Vote is one voter's vote for a claimant.
type Vote struct {
	Voter, Claimant string
	HLC             messages.HLC
}

// Input is everything the rules look at for one domain.
type Input struct {
	Claims []Claim
	Votes  []Vote
	Active map[string]bool // active peers including self
}

// State is the spec's ConsensusState (without lastResolution, which is
// kept by the caller across computations).
type State struct {
	Status           string
	Hash             string // "" unless resolved
	ResolvedClaimant string // "" unless resolved
	SSL              bool
	VoteCounts       map[string]int
	ActivePeers      int
	QuorumMet        bool
	MinVotes         int
	TotalVotes       int
	Error            string
}

// MinVotes is the quorum for n active peers.
func MinVotes(activePeers int) int { return activePeers/2 + 1 }

// Compute applies the rules to in.
func Compute(in Input) State {
	active := len(in.Active)
	st := State{VoteCounts: make(map[string]int, len(in.Claims)), ActivePeers: active, MinVotes: MinVotes(active)}
	if len(in.Claims) == 0 {
		st.Status = NoClaims
		return st
	}
	claims := make(map[string]Claim, len(in.Claims))
	for _, c := range in.Claims {
		if c.Hash == "" {
			st.Status = Error
			st.Error = "claim by " + c.Writer + " has no hash"
			return st
		}
		claims[c.Writer] = c
		st.VoteCounts[c.Writer] = 0
	}
	for voter, claimant := range effectiveVotes(in.Votes, claims) {
		if !in.Active[voter] {
			continue
		}
		st.VoteCounts[claimant]++
		st.TotalVotes++
	}
	st.QuorumMet = st.TotalVotes >= st.MinVotes
	if !st.QuorumMet {
		st.Status = InsufficientQuorum
		return st
	}
	top, best, shared := 0, "", false
	for claimant, n := range st.VoteCounts {
		switch {
		case n > top:
			top, best, shared = n, claimant, false
		case n == top:
			shared = true
		}
	}
	if shared {
		st.Status = Tie
		return st
	}
	st.Status = Resolved
	st.ResolvedClaimant = best
	st.Hash = claims[best].Hash
	st.SSL = claims[best].SSL
	return st
}

// effectiveVotes gives each voter's one vote: a voter with votes for
// several live claimants counts for the latest (by hlc, then claimant id),
// so a vote switch that is half-replicated never counts twice.
func effectiveVotes(votes []Vote, claims map[string]Claim) map[string]string {
	latest := make(map[string]Vote, len(votes))
	for _, v := range votes {
		if _, ok := claims[v.Claimant]; !ok {
			continue
		}
		cur, ok := latest[v.Voter]
		if !ok || cur.HLC.Less(v.HLC) || (cur.HLC == v.HLC && cur.Claimant < v.Claimant) {
			latest[v.Voter] = v
		}
	}
	out := make(map[string]string, len(latest))
	for voter, v := range latest {
		out[voter] = v.Claimant
	}
	return out
}

// Earliest is the claim auto-voting picks: lowest hlc, then writer id.
func Earliest(claims []Claim) (Claim, bool) {
	if len(claims) == 0 {
		return Claim{}, false
	}
	c := append([]Claim(nil), claims...)
	sort.Slice(c, func(i, j int) bool {
		if c[i].HLC != c[j].HLC {
			return c[i].HLC.Less(c[j].HLC)
		}
		return c[i].Writer < c[j].Writer
	})
	return c[0], true
}

// VotePlan is what self should change to follow the auto-voting rule.
type VotePlan struct {
	VoteFor string   // claimant to vote for ("" = keep current votes)
	Retract []string // claimants whose votes by self must be deleted
}

// AutoVote says how self votes: keep a vote for a claimant that still has
// a claim, otherwise vote for the earliest claim; votes for claimants
// without a claim (or extra votes) are retracted.
func AutoVote(self string, in Input) VotePlan {
	claims := make(map[string]bool, len(in.Claims))
	for _, c := range in.Claims {
		claims[c.Writer] = true
	}
	var mine []Vote
	for _, v := range in.Votes {
		if v.Voter == self {
			mine = append(mine, v)
		}
	}
	var plan VotePlan
	keep := ""
	for _, v := range effectiveVotesOf(mine, claims) {
		keep = v
	}
	if keep == "" {
		if e, ok := Earliest(in.Claims); ok {
			plan.VoteFor = e.Writer
			keep = e.Writer
		}
	}
	for _, v := range mine {
		if v.Claimant != keep {
			plan.Retract = append(plan.Retract, v.Claimant)
		}
	}
	sort.Strings(plan.Retract)
	return plan
}

func effectiveVotesOf(mine []Vote, live map[string]bool) map[string]string {
	claims := make(map[string]Claim, len(live))
	for w := range live {
		claims[w] = Claim{Writer: w}
	}
	return effectiveVotes(mine, claims)
}
