package fleet_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"peerdns/agent/fleet"
	"peerdns/internal/testutil"
	"peerdns/messages"
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

// A parent shows a child's agent version as the child reported it, and
// the new one once the child reconnects upgraded: the parent runs its
// own version, which is not the child's.
func TestParentShowsChildVersion(t *testing.T) {
	p := newParent(t, fleet.ParentConfig{})
	c := newChild(t, p, "alpha", 1)
	for _, v := range []string{"v0.4.2", "v0.4.3"} {
		stop := c.runWith(t, p, messages.StreamHello{Hostname: "alpha", GUID: "guid-alpha", NodeID: "node-alpha", Version: v,
			System:   &messages.StreamSystem{Timezone: "Europe/Vienna", Zone: "CET", ZoneOffset: 3600},
			Settings: &messages.StreamSettings{Parent: true, CORS: "https://alpha.test"}})
		testutil.Eventually(t, 10*time.Second, func() error {
			var info struct {
				Version string `json:"version"`
			}
			if err := tryJSON(p.url+"/host/alpha/api/v1/info", &info); err != nil {
				return err
			}
			if info.Version != v {
				return fmt.Errorf("/host/alpha info version = %q, want %q (the child's)", info.Version, v)
			}
			return nil
		})
		var vs struct {
			Agent struct {
				Version string `json:"version"`
				Go      *string
			} `json:"agent"`
		}
		getJSON(t, p.url+"/host/alpha/api/v3/versions", &vs)
		if vs.Agent.Version != v[1:] || vs.Agent.Go != nil {
			t.Errorf("/host/alpha versions agent = %+v, want version %s and no go (the parent's build)", vs.Agent, v[1:])
		}
		var nodes struct {
			Nodes []struct {
				V        string `json:"v"`
				IsParent bool   `json:"is_parent"`
			} `json:"nodes"`
		}
		var charts struct {
			Timezone string `json:"timezone"`
		}
		getJSON(t, p.url+"/host/alpha/api/v1/charts", &charts)
		if charts.Timezone != "Europe/Vienna" {
			t.Errorf("/host/alpha charts timezone = %q, want the child's Europe/Vienna", charts.Timezone)
		}
		getJSON(t, p.url+"/host/alpha/api/v3/nodes", &nodes)
		if len(nodes.Nodes) != 1 || nodes.Nodes[0].V != v || !nodes.Nodes[0].IsParent {
			t.Errorf("/host/alpha nodes = %+v, want alpha at %s, a parent", nodes.Nodes, v)
		}
		stop()
	}
	// A child that reports no settings: its options are unknown, not
	// the parent's nor defaults.
	stop := c.runWith(t, p, messages.StreamHello{Hostname: "alpha", GUID: "guid-alpha", NodeID: "node-alpha"})
	defer stop()
	testutil.Eventually(t, 10*time.Second, func() error {
		var st map[string]any
		getJSON(t, p.url+"/host/alpha/api/v3/settings", &st)
		if st["rest"] != nil || st["parent"] != nil || st["note"] == nil {
			return fmt.Errorf("/host/alpha settings without a report: %v", st)
		}
		var info struct {
			Version string `json:"version"`
		}
		getJSON(t, p.url+"/host/alpha/api/v1/info", &info)
		if info.Version != "unknown" {
			return fmt.Errorf("/host/alpha info version = %q, want unknown", info.Version)
		}
		return nil
	})
}

// tryJSON reads url's JSON answer into v; an error for any status but 200.
func tryJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}
