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

// listingActor is a ledger actor holding n resolved domains of its own.
func listingActor(n int) *Actor {
	id, _ := identity.Generate()
	a := newActor(Deps{Identity: id})
	a.results = map[string]*domain.Evaluated{}
	a.pubChanged = map[string]bool{}
	subs, _ := ipam.DefaultSubnets("", 0)
	a.addrs = &addresses{pool: ipam.New(subs, nil)}
	a.st.writers[id.ID()] = true
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("d%05d.p2p", i)
		op := &messages.Op{Writer: id.ID(), Seq: uint64(i + 1), Key: messages.ClaimKey(name, id.ID()), Value: `{"hash":"` + hashA + `"}`}
		pk, _ := messages.ParseKey(op.Key)
		a.st.vv[id.ID()] = op.Seq
		a.st.apply(op, []messages.ParsedKey{pk})
		st := consensus.Compute(a.st.input(name, map[string]bool{id.ID(): true}))
		a.results[name] = &domain.Evaluated{Domain: name, State: st}
	}
	return a
}

// BenchmarkListingRebuild10k: what a GET /api/resolved-domains that
// builds the listing whole costs the ledger actor with 10,000 resolved
// domains (the first read after a start or a change of the internal
// domains).
func BenchmarkListingRebuild10k(b *testing.B) {
	a := listingActor(10000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.list.ok = false
		if got := a.domainListing(); len(got) != 10000 {
			b.Fatal(len(got))
		}
	}
}

// BenchmarkListingPatch10k: the same read after ten of the 10,000
// domains changed (a read during a burst of claims).
func BenchmarkListingPatch10k(b *testing.B) {
	a := listingActor(10000)
	a.domainListing()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < 10; j++ {
			a.list.changed(fmt.Sprintf("d%05d.p2p", (i*10+j*997)%10000))
		}
		if got := a.domainListing(); len(got) != 10000 {
			b.Fatal(len(got))
		}
	}
}
