package node_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkBackupRestore10k: a node holding 10,000 domains (10,000 claims
// by a peer and the node's own votes) through its admin API: the time of
// POST /api/backups/create, and of a restore from POST
// /api/backups/restore until the node answers resolved-domains with all
// 10,000 again. Reports the archive size too.
func BenchmarkBackupRestore10k(b *testing.B) {
	n := startNode(b)
	seed(b, n, 10000)
	base := "http://" + n.AdminAddr()
	hc := &http.Client{Timeout: 2 * time.Minute}
	post := func(path, body string, out any) {
		resp, err := hc.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d", path, resp.StatusCode)
		}
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
	}
	count := func() int {
		resp, err := hc.Get(base + "/api/resolved-domains")
		if err != nil || resp.StatusCode != 200 {
			if resp != nil {
				resp.Body.Close()
			}
			return -1
		}
		defer resp.Body.Close()
		var ds []struct{ Hash string }
		_ = json.NewDecoder(resp.Body).Decode(&ds)
		c := 0
		for _, d := range ds {
			if d.Hash != "internal" {
				c++
			}
		}
		return c
	}
	for i := 0; i < b.N; i++ {
		start := time.Now()
		var created struct{ Path string }
		post("/api/backups/create", "", &created)
		b.ReportMetric(time.Since(start).Seconds(), "s_backup")
		var list []struct {
			Name string
			Size int64
		}
		resp, err := hc.Get(base + "/api/backups")
		if err != nil {
			b.Fatal(err)
		}
		_ = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		for _, l := range list {
			if l.Name == filepath.Base(created.Path) {
				b.ReportMetric(float64(l.Size)/(1<<20), "MiB_archive")
			}
		}
		// A claim after the backup, so the restored state is told apart.
		post("/api/add-domain", fmt.Sprintf(`{"domain":"after%d.p2p","hash":"hs://%s"}`, i, strings.Repeat("e", 64)), nil)
		if c := count(); c != 10001 {
			b.Fatalf("before restore: %d domains", c)
		}
		start = time.Now()
		post("/api/backups/restore", fmt.Sprintf(`{"backupName":%q}`, filepath.Base(created.Path)), nil)
		deadline := time.Now().Add(5 * time.Minute)
		for {
			if count() == 10000 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("restore did not finish in 5 minutes")
			}
			time.Sleep(50 * time.Millisecond)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s_restore")
	}
}
