package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"peerdns/agent/rpc"
	"peerdns/internal/testutil"
	"peerdns/transport/identity"
)

// TestRemoteWriteOfAChildOnTheParentsHost runs a parent that sends its
// points and its child's to a real Prometheus, and a child on the same
// machine: both name the same host, and each keeps series of its own.
func TestRemoteWriteOfAChildOnTheParentsHost(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not installed (apt-get install prometheus): needed to check remote-write against a real receiver")
	}
	prom := testutil.FreeTCPAddr(t)
	pdir, cdir := t.TempDir(), t.TempDir()
	cfgFile := filepath.Join(pdir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte("global:\n  scrape_interval: 1m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(pdir, "prometheus"),
		"--web.listen-address="+prom, "--web.enable-remote-write-receiver", "--log.level=warn")
	cmd.Stderr = &testutil.LogBuffer{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// query returns the result of an instant query.
	query := func(q string) ([]json.RawMessage, error) {
		resp, err := http.Get("http://" + prom + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var r struct {
			Data struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%v: %s", err, b)
		}
		return r.Data.Result, nil
	}
	testutil.Eventually(t, 30*time.Second, func() error { _, err := query("up"); return err })

	cid, err := identity.LoadOrCreate(filepath.Join(cdir, "agent", "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rpc.Allow(filepath.Join(pdir, "agent"), cid.ID(), "child"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENT_REST_PORT", "0")
	t.Setenv("AGENT_PARENT", "1")
	t.Setenv("AGENT_REMOTE_WRITE_URL", "http://"+prom+"/api/v1/write")
	parent := startAgent(t, context.Background(), testConfig(t, pdir))
	parent.waitLog(t, listeningRE)
	ppeer := parent.waitLog(t, peerRE)
	pid, err := identity.LoadOrCreate(filepath.Join(pdir, "agent", "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENT_PARENT", "0")
	t.Setenv("AGENT_REMOTE_WRITE_URL", "")
	t.Setenv("AGENT_PARENT_DEST", pid.ID()+"@"+ppeer)
	child := startAgent(t, context.Background(), testConfig(t, cdir))
	child.waitLog(t, listeningRE)

	// The parent's system.cpu and the child's: two series (one, written
	// by both, when the child's were the parent's), the child's with its
	// key.
	testutil.Eventually(t, 30*time.Second, func() error {
		all, err := query(`{chart="system.cpu",dimension="user"}[5s]`)
		if err != nil {
			return err
		}
		childs, err := query(`{chart="system.cpu",dimension="user",peer_key="` + cid.ID() + `"}[5s]`)
		if err != nil {
			return err
		}
		if len(all) != 2 || len(childs) != 1 {
			return fmt.Errorf("series: %s; the child's: %s", all, childs)
		}
		return nil
	})
}
