package ledger

import (
	"fmt"
	"testing"

	"peerdns/actors/consensus"
	"peerdns/actors/domain"
	"peerdns/internal/ipam"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// BenchmarkListingRebuild10k: what the first GET /api/resolved-domains
// after a change costs the ledger actor with 10,000 resolved domains.
func BenchmarkListingRebuild10k(b *testing.B) {
	id, _ := identity.Generate()
	a := newActor(Deps{Identity: id})
	a.results = map[string]*domain.Evaluated{}
	subs, _ := ipam.DefaultSubnets("", 0)
	a.addrs = &addresses{pool: ipam.New(subs, nil)}
	a.st.writers[id.ID()] = true
	for i := 0; i < 10000; i++ {
		name := fmt.Sprintf("d%05d.p2p", i)
		op := &messages.Op{Writer: id.ID(), Seq: uint64(i + 1), Key: messages.ClaimKey(name, id.ID()), Value: `{"hash":"` + hashA + `"}`}
		pk, _ := messages.ParseKey(op.Key)
		a.st.vv[id.ID()] = op.Seq
		a.st.apply(op, []messages.ParsedKey{pk})
		st := consensus.Compute(a.st.input(name, map[string]bool{id.ID(): true}))
		a.results[name] = &domain.Evaluated{Domain: name, State: st}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.listingOK = false
		if got := a.domainListing(); len(got) != 10000 {
			b.Fatal(len(got))
		}
	}
}
