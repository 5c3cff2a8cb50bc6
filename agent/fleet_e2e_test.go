package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"peerdns/agent/rpc"
	"peerdns/internal/testutil"
	"peerdns/transport/identity"
)

var peerRE = regexp.MustCompile(`agent peer RPC listening on (127\.0\.0\.1:\d+)`)

// TestParentAndChildAgents runs two whole agents: a parent and a child
// that streams its real collected charts to it over the peer transport;
// an operator reads the child's data through the parent's REST API and
// calls the parent over the RPC.
func TestParentAndChildAgents(t *testing.T) {
	pdir, cdir := t.TempDir(), t.TempDir()
	cid, err := identity.LoadOrCreate(filepath.Join(cdir, "agent", "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rpc.Allow(filepath.Join(pdir, "agent"), cid.ID(), "child"); err != nil {
		t.Fatal(err)
	}
	op, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := rpc.Allow(filepath.Join(pdir, "agent"), op.ID(), "viewer"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENT_REST_PORT", "0")
	t.Setenv("AGENT_PARENT", "1")
	pcfg := testConfig(t, pdir)
	parent := startAgent(t, context.Background(), pcfg)
	papi := parent.waitLog(t, listeningRE)
	ppeer := parent.waitLog(t, peerRE)
	pid, err := identity.LoadOrCreate(filepath.Join(pdir, "agent", "identity.key"))
	if err != nil {
		t.Fatal(err)
	}

	t.Setenv("AGENT_PARENT", "0")
	t.Setenv("AGENT_PARENT_DEST", pid.ID()+"@"+ppeer)
	ccfg := testConfig(t, cdir)
	child := startAgent(t, context.Background(), ccfg)
	child.waitLog(t, listeningRE)

	var host string
	testutil.Eventually(t, 20*time.Second, func() error {
		_, _, b := get(t, "http://"+papi+"/api/v3/fleet")
		var f struct {
			Children []struct {
				Hostname string         `json:"nm"`
				Key      string         `json:"public_key"`
				Child    map[string]any `json:"child"`
			} `json:"children"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			return err
		}
		if len(f.Children) != 1 || f.Children[0].Key != cid.ID() || f.Children[0].Child["state"] != "live" {
			return fmt.Errorf("fleet children: %s", b)
		}
		host = f.Children[0].Hostname
		return nil
	})
	// The child's system.cpu, through the parent, by the child's key.
	testutil.Eventually(t, 20*time.Second, func() error {
		code, _, b := get(t, "http://"+papi+"/api/v1/data?chart=system.cpu&after=-5&points=5&format=json&scope_nodes="+cid.ID())
		var d struct {
			Data [][]any `json:"data"`
		}
		if code != 200 || json.Unmarshal(b, &d) != nil || len(d.Data) == 0 || d.Data[0][1] == nil {
			return fmt.Errorf("child data through the parent: %d %s", code, b)
		}
		return nil
	})
	// A viewer reads the fleet over the RPC (REST tunnel).
	c, err := rpc.NewClient(op, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req, _ := rpc.BuildRequest("get", []string{"/api/v2/nodes"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := c.Call(ctx, pid.ID(), ppeer, req)
	if err != nil {
		t.Fatal(err)
	}
	var nodes struct {
		Nodes []struct {
			Hostname string `json:"nm"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(rep.Body, &nodes); err != nil || len(nodes.Nodes) != 2 || nodes.Nodes[1].Hostname != host {
		t.Errorf("nodes over the RPC: %v %s", err, rep.Body)
	}
	child.stop(t)
	testutil.Eventually(t, 20*time.Second, func() error {
		_, _, b := get(t, "http://"+papi+"/api/v3/fleet")
		var f struct {
			States map[string]int `json:"states"`
		}
		if err := json.Unmarshal(b, &f); err != nil || f.States["disconnected"] != 1 {
			return fmt.Errorf("after the child stopped: %s", b)
		}
		return nil
	})
}

// TestRemoteWriteInSettings runs an agent whose remote-write receiver is
// down: settings shows the writer trying (requests and retries counted)
// and the agent serves on.
func TestRemoteWriteInSettings(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AGENT_REST_PORT", "0")
	ln := freePort(t) // nothing listens there once freePort returns
	t.Setenv("AGENT_REMOTE_WRITE_URL", fmt.Sprintf("http://127.0.0.1:%d/api/v1/write", ln))
	r := startAgent(t, context.Background(), testConfig(t, dir))
	addr := r.waitLog(t, listeningRE)
	testutil.Eventually(t, 20*time.Second, func() error {
		_, _, b := get(t, "http://"+addr+"/api/v3/settings")
		var s struct {
			RW map[string]any `json:"remote_write"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s.RW["enabled"] != true || s.RW["retries"].(float64) < 1 || s.RW["samples_sent"].(float64) != 0 {
			return fmt.Errorf("remote_write = %v", s.RW)
		}
		return nil
	})
}
