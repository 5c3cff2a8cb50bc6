package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"peerdns/actors/consensus"
	"peerdns/actors/domain"
	"peerdns/messages"
	"peerdns/transport/identity"
)

// A listing built from the last one and the domains marked since is the
// listing built whole, entry for entry and byte for byte, through random
// claims, votes, removals, evaluations and retirements by three writers,
// read after a few changes at a time (patches upon patches), and after
// a change of the internal domains.
func TestListingPatchedAsBuiltWhole(t *testing.T) {
	a := listingActor(0)
	writers := []string{a.st.self}
	for range 2 {
		id, _ := identity.Generate()
		writers = append(writers, id.ID())
	}
	for _, w := range writers {
		a.st.writers[w] = true
	}
	active := map[string]bool{}
	for _, w := range writers {
		active[w] = true
	}
	hashes := []string{hashA, "hs://" + fmt.Sprintf("%064x", 2), "hs://" + fmt.Sprintf("%064x", 3)}
	r := rand.New(rand.NewPCG(3, 4))
	var wall int64
	write := func(w string, key, value string, del bool) {
		wall++
		op := &messages.Op{Writer: w, Seq: a.st.vv[w] + 1, HLC: messages.HLC{Wall: wall}, Key: key, Value: value, Delete: del}
		pk, err := messages.ParseKey(op.Key)
		if err != nil {
			t.Fatal(err)
		}
		a.touch(a.st.apply(op, []messages.ParsedKey{pk})...)
	}
	patched, whole := 0, 0
	for step := range 3000 {
		name := fmt.Sprintf("d%02d.p2p", r.IntN(16))
		w := writers[r.IntN(len(writers))]
		switch k := r.IntN(10); {
		case k < 3:
			write(w, messages.ClaimKey(name, w), `{"hash":"`+hashes[r.IntN(len(hashes))]+`"}`, false)
		case k < 4:
			write(w, messages.ClaimKey(name, w), "", true)
		case k < 6:
			write(w, messages.VoteKey(name, w, writers[r.IntN(len(writers))]), messages.VoteMarker, false)
		case k < 7:
			write(w, messages.VoteKey(name, w, writers[r.IntN(len(writers))]), "", true)
		case k < 9:
			// What onEvaluated records.
			a.results[name] = &domain.Evaluated{Domain: name, State: consensus.Compute(a.st.input(name, active)), LastResolution: wall}
			a.domainChanged(name)
		default:
			if idx := a.st.domains[name]; idx == nil || len(idx.claims) == 0 {
				a.retire(nil, name)
			}
		}
		if step%500 == 250 {
			a.internal = map[string]netip.Addr{fmt.Sprintf("i%d.p2p", step): netip.MustParseAddr("127.0.0.1"), "admin.p2p": netip.MustParseAddr("127.0.0.1")}
			a.list.ok = false
		}
		if r.IntN(4) > 0 {
			continue
		}
		if a.list.ok {
			patched++
		} else {
			whole++
		}
		got := a.domainListing()
		gotJSON := a.list.json
		kept := a.list
		a.list = listing{}
		want := a.domainListing()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: patched entries\n%+v\nbuilt whole\n%+v", step, got, want)
		}
		if !bytes.Equal(gotJSON, a.list.json) {
			t.Fatalf("step %d: patched JSON\n%s\nbuilt whole\n%s", step, gotJSON, a.list.json)
		}
		var decoded []messages.DomainEntry
		if err := json.Unmarshal(gotJSON, &decoded); err != nil || len(decoded) != len(got) {
			t.Fatalf("step %d: the JSON does not decode to %d entries: %v", step, len(got), err)
		}
		a.list = kept
	}
	if patched < 100 || whole < 5 {
		t.Fatalf("%d patched and %d whole builds compared: the test did not exercise both", patched, whole)
	}
}

// A peer's claim on one of this node's internal domains stays in the
// ledger, but the node answers the domain itself: the listing shows it
// once, as internal, not a second time with the peer's hash.
func TestClaimOnAnInternalDomainListedOnce(t *testing.T) {
	const name = "admin.p2p"
	l := newTestLedgerWith(t, t.TempDir(), func(d *Deps) {
		d.Internal = map[string]netip.Addr{name: netip.MustParseAddr("127.0.0.1")}
	})
	peers, _ := addConnectedWriters(t, l, 1)
	p := peers[0]
	op := sign(t, p, &messages.Op{Seq: 1, HLC: messages.HLC{Wall: time.Now().UnixMilli()}, Batch: []messages.Write{
		{Key: messages.ClaimKey(name, p.ID()), Value: `{"hash":"` + hashA + `"}`},
		{Key: messages.VoteKey(name, p.ID(), p.ID()), Value: messages.VoteMarker},
	}})
	if rep := ask[*messages.ApplyOpsReply](t, l, &messages.ApplyOps{From: "test", Ops: []*messages.Op{op}}); rep.Applied != 1 {
		t.Fatalf("apply: %+v", rep)
	}
	rep := ask[*messages.GetDomainsReply](t, l, &messages.GetDomains{})
	var got []messages.DomainEntry
	for _, e := range rep.Domains {
		if e.Domain == name {
			got = append(got, e)
		}
	}
	if len(got) != 1 || got[0].ConsensusStatus != consensus.Internal || got[0].Hash != consensus.Internal {
		t.Fatalf("%s listed as %+v, want once, internal", name, got)
	}
	var decoded []messages.DomainEntry
	if err := json.Unmarshal(rep.JSON, &decoded); err != nil || len(decoded) != len(rep.Domains) {
		t.Fatalf("listing JSON: %d entries, %v; want %d", len(decoded), err, len(rep.Domains))
	}
}
