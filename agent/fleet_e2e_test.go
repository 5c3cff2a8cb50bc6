package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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

// TestParentAnswersAsChild runs a parent and a child whose options all
// differ from the parent's (the child is itself a parent, with its own
// CORS origin, export folder, journal and retention): every answer of
// the parent under /host/<child>/ that names a node's version, machine
// or options names the child's, as the child answers them itself.
func TestParentAnswersAsChild(t *testing.T) {
	pdir, cdir := t.TempDir(), t.TempDir()
	cid, err := identity.LoadOrCreate(filepath.Join(cdir, "agent", "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rpc.Allow(filepath.Join(pdir, "agent"), cid.ID(), "child"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENT_REST_PORT", "0")
	t.Setenv("AGENT_PARENT", "1")
	t.Setenv("AGENT_REST_CORS", "https://parent.test")
	t.Setenv("AGENT_JOURNAL", "0")
	parent := startAgent(t, context.Background(), testConfig(t, pdir))
	papi := parent.waitLog(t, listeningRE)
	ppeer := parent.waitLog(t, peerRE)
	pid, err := identity.LoadOrCreate(filepath.Join(pdir, "agent", "identity.key"))
	if err != nil {
		t.Fatal(err)
	}

	t.Setenv("AGENT_REST_CORS", "https://child.test")
	t.Setenv("AGENT_JOURNAL", "1")
	t.Setenv("AGENT_PARENT_DEST", pid.ID()+"@"+ppeer)
	child := startAgent(t, context.Background(), testConfig(t, cdir))
	capi := child.waitLog(t, listeningRE)
	testutil.Eventually(t, 20*time.Second, func() error {
		_, _, b := get(t, "http://"+papi+"/api/v3/fleet")
		var f struct {
			States map[string]int `json:"states"`
		}
		if err := json.Unmarshal(b, &f); err != nil || f.States["live"] != 1 {
			return fmt.Errorf("fleet: %s", b)
		}
		return nil
	})

	info := []string{"version", "uid", "os_name", "os_id", "os_version", "os_version_id", "kernel_name", "kernel_version",
		"architecture", "virtualization", "container", "cores_total", "cpu_freq", "ram_total", "total_disk_space",
		"stream-enabled", "host_labels._is_parent", "host_labels._os_version", "host_labels._kernel_version",
		"host_labels._system_cores", "host_labels._system_ram_total", "database.public_key", "database.discovery_key",
		"database.peer_rpc.listening", "database.peer_rpc.address"}
	settings := []string{"rest.cors", "parent", "export_dir", "journal", "remote_write.enabled", "logs.journal", "logs.anomaly_detector"}
	node := []string{"nodes.0.v", "nodes.0.nm", "nodes.0.mg", "nodes.0.is_parent", "nodes.0.os.v", "nodes.0.os.id",
		"nodes.0.os.kernel.nm", "nodes.0.os.kernel.v", "nodes.0.hw.cpus", "nodes.0.hw.memory", "nodes.0.hw.disk_space",
		"nodes.0.hw.cpu_frequency", "nodes.0.hw.container", "nodes.0.hw.virtualization", "nodes.0.capabilities.0.enabled",
		"nodes.0.capabilities.2.enabled"}
	for _, tc := range []struct {
		path   string
		fields []string
	}{
		{"/api/v1/info", info},
		{"/api/v2/info", info},
		{"/api/v3/info", info},
		{"/api/v1/settings", settings},
		{"/api/v2/settings", settings},
		{"/api/v3/settings", settings},
		{"/api/v3/config", settings},
		{"/", []string{"version", "hostname", "peer_public_key", "db.discovery_key", "db.peer_rpc.address"}},
		{"/api/v3/db", []string{"public_key", "discovery_key", "peer_rpc.listening", "peer_rpc.address"}},
		{"/api/v1/versions", []string{"agent.version"}},
		{"/api/v3/versions", []string{"agent.version"}},
		{"/api/v3/nodes", node},
		{"/api/v3/node_instances", node},
		{"/api/v3/fleet", append(node, "parent")},
		{"/api/v3/tunnel", []string{"enabled", "status", "public_key", "discovery_key", "rpc.address"}},
		{"/api/v1/charts", []string{"version", "hostname", "timezone", "os"}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			_, _, own := get(t, "http://"+capi+tc.path)
			code, _, via := get(t, "http://"+papi+"/host/"+cid.ID()+tc.path)
			if code != 200 {
				t.Fatalf("through the parent: %d %s", code, via)
			}
			for _, f := range tc.fields {
				want, got := jsonAt(t, own, f), jsonAt(t, via, f)
				if want == nil || fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s: through the parent %v, the child says %v", f, got, want)
				}
			}
		})
	}
	// The parent's own process and data folder are never shown as the
	// child's; the child's retention is shown beside the copy the parent
	// keeps.
	_, _, tun := get(t, "http://"+papi+"/host/"+cid.ID()+"/api/v3/tunnel")
	if jsonAt(t, tun, "pid") != nil {
		t.Errorf("tunnel of the child through the parent has a pid (the parent's): %s", tun)
	}
	_, _, own := get(t, "http://"+capi+"/api/v3/settings")
	_, _, via := get(t, "http://"+papi+"/host/"+cid.ID()+"/api/v3/settings")
	for _, tier := range []string{"tier0", "tier1"} {
		if w, g := jsonAt(t, own, "retention."+tier+".seconds"), jsonAt(t, via, "retention."+tier+".on_node_seconds"); w == nil || g != w {
			t.Errorf("%s retention on the child: through the parent %v, the child says %v", tier, g, w)
		}
	}
	if d := jsonAt(t, via, "storage.dir"); d != "" {
		t.Errorf("storage.dir of the child's copy on the parent = %v, want \"\" (held in memory)", d)
	}
}

// jsonAt is the member at a dotted path (numbers index arrays) of the
// JSON object b, nil when absent.
func jsonAt(t *testing.T, b []byte, path string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}
