// Package consensus holds the pure rules that pick a domain's resolved
// claimant from the ledger's claims and votes. It does no I/O and keeps no
// state; the domain actor calls it and caches the result.
//
// Rules (docs/architecture.md, "Consensus per domain"):
//   - active peers = connected writers + self; in a network of more than
//     R writers (DefaultReplicas, a setting), the active members of the
//     domain's replica set only (replica.go): then only they vote, and
//     ActivePeers and MinVotes are the replica set's;
//   - only votes cast by active peers, for claimants that still have a
//     claim, are counted: an offline peer cannot vouch for anything now;
//   - minVotes = floor(activePeers/2)+1;
//   - no claims → no_claims; totalVotes < minVotes → insufficient_quorum;
//     the top count shared by several claimants → tie; else resolved.
package consensus

import (
	"slices"
	"sort"
	"strings"

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
	// Replicas is the domain's replica set when the network has more
	// than R writers (Restrict sets it, with Active narrowed to it); nil
	// means every writer is a replica.
	Replicas map[string]bool
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
//
// It is called for every evaluation of every domain (thousands a second
// in a burst), so it works on the input's slices instead of building maps
// of claims and votes: a domain has a handful of claims and one vote per
// writer, and a linear scan of those is cheaper than hashing them.
func Compute(in Input) State {
	st, ok := begin(in)
	if !ok {
		return st
	}
	for _, c := range in.Claims {
		if c.Hash == "" {
			st.Status = Error
			st.Error = "claim by " + c.Writer + " has no hash"
			return st
		}
		st.VoteCounts[c.Writer] = 0
	}
	votes := byVoter(in.Votes)
	for i := 0; i < len(votes); {
		voter := votes[i].Voter
		best := -1
		for ; i < len(votes) && votes[i].Voter == voter; i++ {
			if hasClaim(in.Claims, votes[i].Claimant) && (best < 0 || later(votes[i], votes[best])) {
				best = i
			}
		}
		if best >= 0 && in.Active[voter] {
			st.VoteCounts[votes[best].Claimant]++
			st.TotalVotes++
		}
	}
	best, ok := st.decide()
	if !ok {
		return st
	}
	c := lastClaim(in.Claims, best)
	st.Status = Resolved
	st.ResolvedClaimant = best
	st.Hash = c.Hash
	st.SSL = c.SSL
	return st
}

// begin is the state before any vote is counted; ok false when there is
// nothing to count (no claims).
func begin(in Input) (st State, ok bool) {
	active := len(in.Active)
	st = State{VoteCounts: make(map[string]int, len(in.Claims)), ActivePeers: active, MinVotes: MinVotes(active)}
	if len(in.Claims) == 0 {
		st.Status = NoClaims
		return st, false
	}
	return st, true
}

// decide applies the quorum and tie rules to the counted votes: the
// resolved claimant, or ok false with Status set to insufficient_quorum
// or tie.
func (st *State) decide() (best string, ok bool) {
	st.QuorumMet = st.TotalVotes >= st.MinVotes
	if !st.QuorumMet {
		st.Status = InsufficientQuorum
		return "", false
	}
	top, shared := 0, false
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
		return "", false
	}
	return best, true
}

// A voter with votes for several live claimants counts for the latest
// (by hlc, then claimant id), so a vote switch that is half-replicated
// never counts twice. later says whether a is that rather than b.
func later(a, b Vote) bool {
	return b.HLC.Less(a.HLC) || (a.HLC == b.HLC && a.Claimant > b.Claimant)
}

// byVoter is votes with each voter's votes next to each other: as given
// when they are (the ledger sorts them), else a sorted copy.
func byVoter(votes []Vote) []Vote {
	if slices.IsSortedFunc(votes, cmpVoter) {
		return votes
	}
	out := slices.Clone(votes)
	slices.SortStableFunc(out, cmpVoter)
	return out
}

func cmpVoter(a, b Vote) int { return strings.Compare(a.Voter, b.Voter) }

func hasClaim(claims []Claim, writer string) bool {
	for i := range claims {
		if claims[i].Writer == writer {
			return true
		}
	}
	return false
}

// lastClaim is writer's claim (the last one listed, as a map of the
// claims by writer would keep).
func lastClaim(claims []Claim, writer string) Claim {
	for i := len(claims) - 1; i >= 0; i-- {
		if claims[i].Writer == writer {
			return claims[i]
		}
	}
	return Claim{}
}

// Earliest is the claim auto-voting picks: lowest hlc, then writer id.
func Earliest(claims []Claim) (Claim, bool) {
	if len(claims) == 0 {
		return Claim{}, false
	}
	e := claims[0]
	for _, c := range claims[1:] {
		if c.HLC.Less(e.HLC) || (c.HLC == e.HLC && c.Writer < e.Writer) {
			e = c
		}
	}
	return e, true
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
	if in.Replicas != nil && !in.Replicas[self] {
		// Not one of the domain's voters: a vote would not count, and
		// writing one would cost every node a write for nothing.
		return VotePlan{}
	}
	keep, kept := "", -1
	for i, v := range in.Votes {
		if v.Voter == self && hasClaim(in.Claims, v.Claimant) && (kept < 0 || later(v, in.Votes[kept])) {
			kept = i
		}
	}
	var plan VotePlan
	if kept >= 0 {
		keep = in.Votes[kept].Claimant
	} else if e, ok := Earliest(in.Claims); ok {
		plan.VoteFor = e.Writer
		keep = e.Writer
	}
	for _, v := range in.Votes {
		if v.Voter == self && v.Claimant != keep {
			plan.Retract = append(plan.Retract, v.Claimant)
		}
	}
	sort.Strings(plan.Retract)
	return plan
}
