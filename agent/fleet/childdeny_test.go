package fleet_test

import (
	"fmt"
	"testing"
	"time"

	"peerdns/agent/api"
	"peerdns/agent/fleet"
	"peerdns/agent/rpc"
	"peerdns/internal/testutil"
)

// A child denied while it streams stops streaming: its stream is the one
// call it makes, and it lasts as long as the child is up.
func TestDeniedChildStopsStreaming(t *testing.T) {
	p := newParent(t, fleet.ParentConfig{})
	c := newChild(t, p, "alpha", 2)
	c.run(t, p)
	state := func(want string) func() error {
		return func() error {
			for _, n := range p.parent.Children() {
				if n.PublicKey == c.id.ID() && n.State == want {
					return nil
				}
			}
			return fmt.Errorf("children %+v, want alpha %s", p.parent.Children(), want)
		}
	}
	testutil.Eventually(t, 10*time.Second, state(api.ChildLive))
	if err := rpc.Deny(p.dir, c.id.ID()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, state(api.ChildDisconnected))
}
