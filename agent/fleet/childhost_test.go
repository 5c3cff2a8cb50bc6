package fleet_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"peerdns/agent/fleet"
	"peerdns/internal/testutil"
)

// A parent answers /host/<child>/... for the child, as Netdata's parent
// does: its info lists the children in mirrored_hosts, and its dashboard
// and scripts reach a child by that name or its machine GUID.
func TestParentHostPrefix(t *testing.T) {
	p := newParent(t, fleet.ParentConfig{})
	c := newChild(t, p, "alpha", 3)
	first := c.now - 296
	c.run(t, p)
	testutil.Eventually(t, 10*time.Second, func() error { return held(p, c.id.ID(), first, c.now-1) })
	var info struct {
		Mirrored []string `json:"mirrored_hosts"`
	}
	getJSON(t, p.url+"/api/v1/info", &info)
	if len(info.Mirrored) != 2 || info.Mirrored[1] != "alpha" {
		t.Fatalf("mirrored_hosts = %v, want the parent and alpha", info.Mirrored)
	}
	for _, name := range []string{"alpha", "guid-alpha"} {
		var d struct {
			Labels []string `json:"labels"`
			Data   [][]any  `json:"data"`
		}
		getJSON(t, p.url+"/host/"+name+"/api/v1/data?chart=system.cpu&after=-30&points=10", &d)
		if len(d.Labels) != 4 || d.Labels[1] != "d0" || len(d.Data) == 0 {
			t.Errorf("/host/%s data: labels %v, %d rows; want alpha's d0-d2", name, d.Labels, len(d.Data))
		}
		var ci struct {
			UID string `json:"uid"`
		}
		getJSON(t, p.url+"/host/"+name+"/api/v1/info", &ci)
		if ci.UID != "guid-alpha" {
			t.Errorf("/host/%s info: uid %q, want guid-alpha", name, ci.UID)
		}
	}
	resp, err := http.Get(p.url + "/host/beta/api/v1/info")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(b), "host: beta") {
		t.Errorf("/host/beta: %d %s, want 404", resp.StatusCode, b)
	}
}
