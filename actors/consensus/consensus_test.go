package consensus

import (
	"reflect"
	"testing"

	"peerdns/messages"
)

func hlc(w int64) messages.HLC { return messages.HLC{Wall: w} }

func active(ids ...string) map[string]bool {
	m := map[string]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func TestCompute(t *testing.T) {
	tests := []struct {
		name     string
		in       Input
		status   string
		winner   string
		total    int
		minVotes int
	}{
		{"no claims", Input{Active: active("a")}, NoClaims, "", 0, 1},
		{"single node resolves with own vote",
			Input{Claims: []Claim{{Writer: "a", Hash: "h1", HLC: hlc(1)}}, Votes: []Vote{{"a", "a", hlc(2)}}, Active: active("a")},
			Resolved, "a", 1, 1},
		{"claim without votes lacks quorum",
			Input{Claims: []Claim{{Writer: "a", Hash: "h1"}}, Active: active("a")},
			InsufficientQuorum, "", 0, 1},
		{"three peers need two votes",
			Input{Claims: []Claim{{Writer: "a", Hash: "h1"}}, Votes: []Vote{{"a", "a", hlc(1)}}, Active: active("a", "b", "c")},
			InsufficientQuorum, "", 1, 2},
		{"three peers two votes resolve",
			Input{Claims: []Claim{{Writer: "a", Hash: "h1"}}, Votes: []Vote{{"a", "a", hlc(1)}, {"b", "a", hlc(1)}}, Active: active("a", "b", "c")},
			Resolved, "a", 2, 2},
		{"votes of inactive peers do not count",
			Input{Claims: []Claim{{Writer: "a", Hash: "h1"}}, Votes: []Vote{{"a", "a", hlc(1)}, {"x", "a", hlc(1)}, {"y", "a", hlc(1)}}, Active: active("a", "b", "c")},
			InsufficientQuorum, "", 1, 2},
		{"tie between two claimants",
			Input{Claims: []Claim{{Writer: "a", Hash: "h1"}, {Writer: "b", Hash: "h2"}}, Votes: []Vote{{"a", "a", hlc(1)}, {"b", "b", hlc(1)}}, Active: active("a", "b")},
			Tie, "", 2, 2},
		{"majority among two claimants",
			Input{Claims: []Claim{{Writer: "a", Hash: "h1"}, {Writer: "b", Hash: "h2"}}, Votes: []Vote{{"a", "a", hlc(1)}, {"b", "a", hlc(1)}, {"c", "b", hlc(1)}}, Active: active("a", "b", "c")},
			Resolved, "a", 3, 2},
		{"votes for a claimant without claim are ignored",
			Input{Claims: []Claim{{Writer: "a", Hash: "h1"}}, Votes: []Vote{{"a", "z", hlc(1)}, {"b", "z", hlc(1)}}, Active: active("a", "b")},
			InsufficientQuorum, "", 0, 2},
		{"a voter with two votes counts once, for the latest",
			Input{Claims: []Claim{{Writer: "a", Hash: "h1"}, {Writer: "b", Hash: "h2"}}, Votes: []Vote{{"a", "a", hlc(1)}, {"a", "b", hlc(5)}}, Active: active("a")},
			Resolved, "b", 1, 1},
		{"claim without hash is an error",
			Input{Claims: []Claim{{Writer: "a"}}, Active: active("a")},
			Error, "", 0, 1},
		{"five peers need three",
			Input{Claims: []Claim{{Writer: "a", Hash: "h1"}}, Votes: []Vote{{"a", "a", hlc(1)}, {"b", "a", hlc(1)}}, Active: active("a", "b", "c", "d", "e")},
			InsufficientQuorum, "", 2, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(tt.in)
			if got.Status != tt.status || got.ResolvedClaimant != tt.winner || got.TotalVotes != tt.total || got.MinVotes != tt.minVotes {
				t.Fatalf("Compute = status %q winner %q total %d min %d, want %q %q %d %d",
					got.Status, got.ResolvedClaimant, got.TotalVotes, got.MinVotes, tt.status, tt.winner, tt.total, tt.minVotes)
			}
			if got.QuorumMet != (got.TotalVotes >= got.MinVotes) {
				t.Fatalf("QuorumMet = %v with %d/%d", got.QuorumMet, got.TotalVotes, got.MinVotes)
			}
			if tt.status == Resolved && got.Hash == "" {
				t.Fatal("resolved without hash")
			}
			if tt.status != Resolved && got.Hash != "" {
				t.Fatalf("hash %q set while %s", got.Hash, got.Status)
			}
		})
	}
}

func TestAutoVote(t *testing.T) {
	claims := []Claim{{Writer: "b", Hash: "h2", HLC: hlc(5)}, {Writer: "a", Hash: "h1", HLC: hlc(9)}, {Writer: "c", Hash: "h3", HLC: hlc(5)}}
	tests := []struct {
		name  string
		votes []Vote
		want  VotePlan
	}{
		{"no vote yet: earliest by hlc then writer", nil, VotePlan{VoteFor: "b"}},
		{"keeps a vote for a live claimant", []Vote{{"self", "a", hlc(1)}}, VotePlan{}},
		{"retracts a vote for a claimant without claim", []Vote{{"self", "gone", hlc(1)}}, VotePlan{VoteFor: "b", Retract: []string{"gone"}}},
		{"keeps latest of two live votes, retracts the other", []Vote{{"self", "a", hlc(1)}, {"self", "c", hlc(2)}}, VotePlan{Retract: []string{"a"}}},
		{"other voters do not matter", []Vote{{"x", "a", hlc(1)}}, VotePlan{VoteFor: "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AutoVote("self", Input{Claims: claims, Votes: tt.votes})
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("AutoVote = %+v, want %+v", got, tt.want)
			}
		})
	}
	if got := AutoVote("self", Input{}); got.VoteFor != "" || len(got.Retract) != 0 {
		t.Fatalf("AutoVote with no claims = %+v", got)
	}
}
