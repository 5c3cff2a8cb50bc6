package ledger

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"peerdns/messages"
)

// TestListingJSONAsTheCodec: the hand-written listing decodes to what
// encoding/json's encoding of the same entries decodes to, field for
// field (nulls, empty arrays and omitted fields alike), for random
// entries with strings that need escaping.
func TestListingJSONAsTheCodec(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	pieces := []string{"", "a", "example.p2p", "hs://" + "ab", `"`, `\`, "\n", "\t", "\x00", "\x1f", "\x7f", "<>&", "é", "\u2028", "\xff", "\xe2\x82", "日本", "💡"}
	str := func() string {
		s := ""
		for range r.IntN(4) {
			s += pieces[r.IntN(len(pieces))]
		}
		return s
	}
	strp := func() *string {
		if r.IntN(3) == 0 {
			return nil
		}
		s := str()
		return &s
	}
	for round := range 300 {
		entries := []messages.DomainEntry{} // the ledger lists a non-nil slice, empty on a fresh node
		for range r.IntN(5) {
			e := messages.DomainEntry{Domain: str(), Hash: str(), IsLocal: r.IntN(2) == 0, IsOwner: r.IntN(2) == 0, ConsensusStatus: str()}
			if r.IntN(4) > 0 {
				cs := &messages.ConsensusState{Status: str(), Hash: strp(), ResolvedClaimant: strp(), ActivePeers: r.IntN(30), QuorumMet: r.IntN(2) == 0, MinVotes: r.IntN(20) - 2, TotalVotes: r.IntN(40), Error: str()}
				if r.IntN(4) > 0 {
					cs.VoteCounts = map[string]int{}
					for range r.IntN(4) {
						cs.VoteCounts[str()] = r.IntN(9)
					}
				}
				if r.IntN(2) == 0 {
					n := r.Int64() - r.Int64()
					cs.LastResolution = &n
				}
				e.ConsensusState = cs
			}
			if r.IntN(4) > 0 {
				e.Services = []messages.Service{}
				for range r.IntN(3) {
					e.Services = append(e.Services, messages.Service{ServiceName: str(), Key: str(), Port: r.IntN(70000) - 10, Protocol: str()})
				}
			}
			switch r.IntN(3) {
			case 0:
				e.Clients = []string{}
			case 1:
				for range 1 + r.IntN(3) {
					e.Clients = append(e.Clients, str())
				}
			}
			entries = append(entries, e)
		}
		ours, _ := appendListing(nil, entries, nil)
		std, err := json.Marshal(entries)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(ours) {
			t.Fatalf("round %d: not JSON: %s", round, ours)
		}
		var a, b any
		if err := json.Unmarshal(ours, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(std, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("round %d:\n ours %s\n json %s", round, ours, std)
		}
	}
}
