package consensus

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"peerdns/messages"
)

// The map-based rules as they were before Compute and AutoVote were
// rewritten over the input's slices: the reference the rewrite must match.

// refCompute is Compute as it was (maps of claims and votes).
func refCompute(in Input) State {
	st, ok := begin(in)
	if !ok {
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
	for voter, claimant := range refEffectiveVotes(in.Votes, claims) {
		if !in.Active[voter] {
			continue
		}
		st.VoteCounts[claimant]++
		st.TotalVotes++
	}
	best, ok := st.decide()
	if !ok {
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
func refEffectiveVotes(votes []Vote, claims map[string]Claim) map[string]string {
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
func refEarliest(claims []Claim) (Claim, bool) {
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

// AutoVote says how self votes: keep a vote for a claimant that still has
// a claim, otherwise vote for the earliest claim; votes for claimants
// without a claim (or extra votes) are retracted.
func refAutoVote(self string, in Input) VotePlan {
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
	for _, v := range refEffectiveVotesOf(mine, claims) {
		keep = v
	}
	if keep == "" {
		if e, ok := refEarliest(in.Claims); ok {
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

func refEffectiveVotesOf(mine []Vote, live map[string]bool) map[string]string {
	claims := make(map[string]Claim, len(live))
	for w := range live {
		claims[w] = Claim{Writer: w}
	}
	return refEffectiveVotes(mine, claims)
}

// randomInput makes a domain's input: up to 4 claimants (some without a
// hash), up to 6 voters with up to 3 votes each (some for claimants with
// no claim, some tied in hlc), votes in random order or sorted as the
// ledger gives them, and a random active set.
func randomInput(r *rand.Rand) Input {
	ids := []string{"a", "b", "c", "d", "e", "f"}
	var in Input
	for _, w := range ids[:r.IntN(5)] {
		h := "h-" + w
		if r.IntN(20) == 0 {
			h = ""
		}
		in.Claims = append(in.Claims, Claim{Writer: w, Hash: h, SSL: r.IntN(2) == 0, HLC: messages.HLC{Wall: int64(r.IntN(4))}})
	}
	for _, v := range ids[:r.IntN(7)] {
		for range r.IntN(4) {
			in.Votes = append(in.Votes, Vote{Voter: v, Claimant: ids[r.IntN(5)], HLC: messages.HLC{Wall: int64(r.IntN(3)), Logical: uint32(r.IntN(2))}})
		}
	}
	if r.IntN(2) == 0 {
		sort.SliceStable(in.Votes, func(i, j int) bool {
			if in.Votes[i].Voter != in.Votes[j].Voter {
				return in.Votes[i].Voter < in.Votes[j].Voter
			}
			return in.Votes[i].Claimant < in.Votes[j].Claimant
		})
	}
	in.Active = map[string]bool{}
	for _, id := range ids {
		if r.IntN(3) > 0 {
			in.Active[id] = true
		}
	}
	return in
}

func TestRewriteMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200_000 {
		in := randomInput(r)
		if got, want := Compute(in), refCompute(in); !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: Compute(%+v)\n got %+v\nwant %+v", i, in, got, want)
		}
		for _, self := range []string{"a", "c", "f"} {
			if got, want := AutoVote(self, in), refAutoVote(self, in); !reflect.DeepEqual(got, want) {
				t.Fatalf("case %d: AutoVote(%s, %+v)\n got %+v\nwant %+v", i, self, in, got, want)
			}
		}
		if got, gok := Earliest(in.Claims); true {
			want, wok := refEarliest(in.Claims)
			if gok != wok || got != want {
				t.Fatalf("case %d: Earliest = %+v %v, want %+v %v", i, got, gok, want, wok)
			}
		}
	}
}

func BenchmarkCompute(b *testing.B) {
	in := Input{Claims: []Claim{{Writer: "w1", Hash: "h", HLC: messages.HLC{Wall: 1}}}, Active: map[string]bool{}}
	for i := range 5 {
		v := fmt.Sprintf("w%d", i+1)
		in.Active[v] = true
		in.Votes = append(in.Votes, Vote{Voter: v, Claimant: "w1", HLC: messages.HLC{Wall: int64(i + 1)}})
	}
	b.ReportAllocs()
	for b.Loop() {
		Compute(in)
		AutoVote("w3", in)
	}
}
