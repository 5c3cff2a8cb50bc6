package node

import (
	"fmt"
	"testing"

	"peerdns/messages"
)

func TestRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	n := newTestNode(t, dir)
	base := "http://" + n.AdminAddr()
	id := n.id.ID()
	for i := 0; i < 5; i++ {
		addDomain(t, base, fmt.Sprintf("d%d.p2p", i), hashA)
	}
	if code, _ := call(t, "POST", base+"/api/remove-domain", `{"domain":"d4.p2p"}`); code != 200 {
		t.Fatalf("remove = %d", code)
	}
	var before, after []domainEntry
	var ifsBefore, ifsAfter []messages.Interface
	var entBefore, entAfter []messages.LedgerEntry
	mustJSON(t, "GET", base+"/api/resolved-domains", "", 200, &before)
	mustJSON(t, "GET", base+"/api/interfaces", "", 200, &ifsBefore)
	mustJSON(t, "GET", base+"/api/entries", "", 200, &entBefore)
	n.Stop()

	n2 := newTestNode(t, dir)
	base = "http://" + n2.AdminAddr()
	if n2.id.ID() != id {
		t.Fatalf("identity changed: %s → %s", id, n2.id.ID())
	}
	mustJSON(t, "GET", base+"/api/resolved-domains", "", 200, &after)
	mustJSON(t, "GET", base+"/api/interfaces", "", 200, &ifsAfter)
	mustJSON(t, "GET", base+"/api/entries", "", 200, &entAfter)
	if len(after) != len(before) || len(after) != 6 { // admin.p2p, profile.p2p, d0..d3
		t.Fatalf("domains before %d after %d", len(before), len(after))
	}
	for i := range before {
		if before[i].Domain != after[i].Domain || before[i].Hash != after[i].Hash || before[i].ConsensusStatus != after[i].ConsensusStatus {
			t.Fatalf("domain %d: before %+v after %+v", i, before[i], after[i])
		}
	}
	if fmt.Sprint(ifsBefore) != fmt.Sprint(ifsAfter) {
		t.Fatalf("interfaces before %v after %v", ifsBefore, ifsAfter)
	}
	if fmt.Sprint(entBefore) != fmt.Sprint(entAfter) {
		t.Fatalf("entries before %v after %v", entBefore, entAfter)
	}
}
