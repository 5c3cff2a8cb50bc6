package ledger

import (
	"testing"

	"peerdns/actors/consensus"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// Another writer's claims that this node's API would refuse are kept in
// the log (replication) but are no claims: a name that is not a canonical
// DNS name (markup, a space, upper case, a final dot) never becomes a
// domain, and a claim without a valid tunnel hash does not turn a domain
// that another peer holds into consensus "error" (before, one peer could
// stop any name from resolving with one write).
func TestPeerClaimsThatTheAPIRefusesAreNoClaims(t *testing.T) {
	owner, _ := identity.Generate()
	liar, _ := identity.Generate()
	s := newState(owner.ID())
	s.writers[owner.ID()] = true
	s.writers[liar.ID()] = true
	seq := map[string]uint64{}
	put := func(id *identity.Identity, key, value string) []string {
		t.Helper()
		seq[id.ID()]++
		op := sign(t, id, &messages.Op{Seq: seq[id.ID()], HLC: messages.HLC{Wall: int64(10 * seq[id.ID()])}, Key: key, Value: value})
		pks, err := s.verify(op)
		if err != nil {
			t.Fatalf("verify %s: %v", key, err)
		}
		return s.apply(op, pks)
	}
	o, l := owner.ID(), liar.ID()
	put(owner, messages.ClaimKey("victim.p2p", o), `{"hash":"`+hashA+`"}`)
	put(owner, messages.VoteKey("victim.p2p", o, o), messages.VoteMarker)
	active := map[string]bool{o: true}
	if st := consensus.Compute(s.input("victim.p2p", active)); st.Status != consensus.Resolved {
		t.Fatalf("victim.p2p before: %+v", st)
	}

	for _, v := range []string{`{"hash":""}`, `{}`, `not json`, `{"hash":"javascript:alert(1)"}`, `{"hash":"<img src=x onerror=alert(1)>"}`} {
		put(liar, messages.ClaimKey("victim.p2p", l), v)
		if st := consensus.Compute(s.input("victim.p2p", active)); st.Status != consensus.Resolved || st.ResolvedClaimant != o {
			t.Errorf("after a claim %s by another writer: %+v", v, st)
		}
		if _, ok := s.claim("victim.p2p", l); ok {
			t.Errorf("claim %s indexed", v)
		}
	}
	// A valid claim of the liar counts again, and a later invalid write of
	// the same key takes it out.
	put(liar, messages.ClaimKey("victim.p2p", l), `{"hash":"`+hashA+`"}`)
	if _, ok := s.claim("victim.p2p", l); !ok {
		t.Fatal("a valid claim of another writer is not indexed")
	}
	put(liar, messages.ClaimKey("victim.p2p", l), `{"hash":""}`)
	if _, ok := s.claim("victim.p2p", l); ok {
		t.Fatal("a claim replaced by one without a hash still counts")
	}

	for _, name := range []string{`x"><img src=x onerror=alert(1)>.p2p`, "ADMIN.P2P", "admin.p2p.", " admin.p2p", "<svg onload=alert(1)>"} {
		if touched := put(liar, messages.ClaimKey(name, l), `{"hash":"`+hashA+`"}`); len(touched) != 0 {
			t.Errorf("claim of %q touched %v", name, touched)
		}
		if touched := put(liar, messages.VoteKey(name, l, l), messages.VoteMarker); len(touched) != 0 {
			t.Errorf("vote on %q touched %v", name, touched)
		}
		if s.domains[name] != nil {
			t.Errorf("%q became a domain", name)
		}
		if _, ok := s.kv[messages.ClaimKey(name, l)]; !ok {
			t.Errorf("claim of %q is not kept for replication", name)
		}
	}
}
