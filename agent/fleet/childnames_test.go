package fleet_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"peerdns/agent/fleet"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

// A child's hello is not who it is: a child that claims another child's
// hostname, GUID and node id (or names itself by the other's key) never
// answers for that child. The key always reaches its own node; a name
// two children claim reaches neither.
func TestChildCannotAnswerForAnother(t *testing.T) {
	p := newParent(t, fleet.ParentConfig{})
	a, b := newChild(t, p, "alpha", 3), newChild(t, p, "mallory", 2)
	a.run(t, p)
	b.runWith(t, p, messages.StreamHello{Hostname: "alpha", GUID: "guid-alpha", NodeID: a.id.ID()})
	testutil.Eventually(t, 10*time.Second, func() error {
		if err := held(p, a.id.ID(), a.now-296, a.now-1); err != nil {
			return err
		}
		return held(p, b.id.ID(), b.now-296, b.now-1)
	})
	dbA, _ := p.parent.DB(a.id.ID())
	dbB, _ := p.parent.DB(b.id.ID())
	for i := 0; i < 32; i++ {
		for _, name := range []string{a.id.ID(), "alpha", "guid-alpha"} {
			if db, ok := p.parent.ChildDB(name); ok && db == dbB {
				t.Fatalf("ChildDB(%.16s) is the impersonator's store", name)
			}
			resp, err := http.Get(p.url + "/host/" + name + "/api/v1/data?chart=system.cpu&after=-30&points=5")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				if name == a.id.ID() {
					t.Fatalf("/host/<alpha's key>: %d %s", resp.StatusCode, body)
				}
				continue
			}
			var d struct {
				Labels []string `json:"labels"`
			}
			if err := json.Unmarshal(body, &d); err != nil {
				t.Fatal(err)
			}
			if len(d.Labels) != 4 {
				t.Fatalf("/host/%.16s answered with labels %v: the impersonator's chart, not alpha's", name, d.Labels)
			}
		}
		if db, ok := p.parent.ChildDB(a.id.ID()); !ok || db != dbA {
			t.Fatal("ChildDB(alpha's key) is not alpha's store")
		}
	}
	// Both are still listed, each under its own key.
	if n := len(p.parent.Children()); n != 2 {
		t.Fatalf("%d children listed, want 2", n)
	}
}
