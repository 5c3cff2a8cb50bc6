package node

import (
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// resolvedNames are the p2p domains listed (internal ones left out).
func resolvedNames(t *testing.T, base string) []string {
	t.Helper()
	var ds []struct{ Domain, Hash string }
	mustJSON(t, "GET", base+"/api/resolved-domains", "", 200, &ds)
	var out []string
	for _, d := range ds {
		if d.Hash != "internal" {
			out = append(out, d.Domain)
		}
	}
	return out
}

// A backup of a node with real ledger data and settings, then changes,
// then a restore: the ledger, the claims and the settings are back, the
// WebSocket clients are told to reload, the admin API answers throughout
// (200 or 503, never a refused connection), and a backup of the state
// before the restore was written.
func TestBackupRestore(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	addDomain(t, base, "keep.p2p", hashA)
	mustJSON(t, "POST", base+"/api/update-settings", `{"settings":{"LOG_LEVEL":"warn"}}`, 200, nil)
	var created struct {
		Success bool
		Path    string
	}
	mustJSON(t, "POST", base+"/api/backups/create", "", 200, &created)
	if !created.Success || !strings.HasPrefix(created.Path, filepath.Join(n.orig.Data, "backups")) {
		t.Fatalf("create: %+v", created)
	}
	name := filepath.Base(created.Path)

	addDomain(t, base, "later.p2p", hashB)
	if code, body := call(t, "POST", base+"/api/remove-domain", `{"domain":"keep.p2p"}`); code != 200 {
		t.Fatalf("remove-domain: %d %s", code, body)
	}
	mustJSON(t, "POST", base+"/api/update-settings", `{"settings":{"LOG_LEVEL":"error"}}`, 200, nil)
	if got := resolvedNames(t, base); len(got) != 1 || got[0] != "later.p2p" {
		t.Fatalf("before restore: %v", got)
	}

	var list []struct {
		Name          string
		Timestamp     string
		Size          int64
		SizeFormatted string
		FileCount     int
	}
	mustJSON(t, "GET", base+"/api/backups", "", 200, &list)
	if len(list) != 1 || list[0].Name != name || list[0].FileCount < 3 || list[0].Size == 0 {
		t.Fatalf("list: %+v", list)
	}
	var meta struct {
		Timestamp string
		Files     []struct{ Name string }
	}
	mustJSON(t, "GET", base+"/api/backups/"+strings.TrimSuffix(name, ".tar.gz")+"/metadata", "", 200, &meta)
	if meta.Timestamp == "" || len(meta.Files) < 3 {
		t.Fatalf("metadata: %+v", meta)
	}

	ws := dialWS(t, n.AdminAddr(), 0)
	// The admin API keeps answering: poll it through the restore.
	stop := make(chan struct{})
	var mu sync.Mutex
	var statuses []int
	var refused error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := hc.Get(base + "/api/health")
			mu.Lock()
			if err != nil {
				var op *net.OpError
				if errors.As(err, &op) && refused == nil {
					refused = err
				}
			} else {
				statuses = append(statuses, resp.StatusCode)
				resp.Body.Close()
			}
			mu.Unlock()
		}
	}()

	var rep struct {
		Success bool
		Message string
	}
	mustJSON(t, "POST", base+"/api/backups/restore", `{"backupName":"`+name+`"}`, 200, &rep)
	if !rep.Success {
		t.Fatalf("restore: %+v", rep)
	}
	readUntil(t, ws, ofType("system-reset"))
	testutil.Eventually(t, 20*time.Second, func() error {
		code, body := call(t, "GET", base+"/api/settings", "")
		if code != 200 || !strings.Contains(body, `"LOG_LEVEL":"warn"`) {
			return errors.New("settings not restored yet")
		}
		if got := resolvedNames(t, base); len(got) != 1 || got[0] != "keep.p2p" {
			return errors.New("domains: " + strings.Join(got, ","))
		}
		return nil
	})
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if refused != nil {
		t.Fatalf("the admin API refused a connection during the restore: %v", refused)
	}
	t.Logf("health during the restore: %d answers, %d of them 503", len(statuses), count(statuses, 503))
	for _, s := range statuses {
		if s != 200 && s != 503 {
			t.Fatalf("health answered %d during the restore", s)
		}
	}
	mustJSON(t, "GET", base+"/api/backups", "", 200, &list)
	if len(list) != 2 {
		t.Fatalf("want the backup and the one written before restoring: %+v", list)
	}
	// The previous files are removed right after the parts start again,
	// which is when the API above could already answer: poll.
	testutil.Eventually(t, 10*time.Second, func() error {
		ents, _ := os.ReadDir(n.orig.Data)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".restore-") || strings.HasPrefix(e.Name(), ".pre-restore-") {
				return errors.New("left behind: " + e.Name())
			}
		}
		return nil
	})
}

// Names that are not plain backup names are 400 everywhere; unknown
// backups 404 (metadata) or 500; a damaged archive and another node's
// backup are refused and the node is unchanged.
func TestBackupBadInput(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	addDomain(t, base, "stay.p2p", hashA)
	for _, bad := range []string{"..%2F..%2Fidentity.key", "%2E%2E", "a%00b", ".hidden", "x%20y"} {
		if code, body := call(t, "DELETE", base+"/api/backups/"+bad, ""); code != 400 {
			t.Fatalf("DELETE %s: %d %s", bad, code, body)
		}
		if code, body := call(t, "GET", base+"/api/backups/"+bad+"/metadata", ""); code != 400 && code != 404 {
			t.Fatalf("metadata %s: %d %s", bad, code, body)
		}
	}
	if _, err := os.Stat(filepath.Join(n.orig.Data, "identity.key")); err != nil {
		t.Fatal("identity.key is gone")
	}
	if code, _ := call(t, "GET", base+"/api/backups/nope/metadata", ""); code != 404 {
		t.Fatalf("unknown metadata: %d", code)
	}
	if code, body := call(t, "DELETE", base+"/api/backups/nope", ""); code != 500 || !strings.Contains(body, "no such backup") {
		t.Fatalf("unknown delete: %d %s", code, body)
	}
	for body, want := range map[string]int{`{}`: 400, `{"backupName":""}`: 400, `{"backupName":"../x"}`: 400, `{"backupName":"nope"}`: 500} {
		if code, b := call(t, "POST", base+"/api/backups/restore", body); code != want {
			t.Fatalf("restore %s: %d %s", body, code, b)
		}
	}

	dir := filepath.Join(n.orig.Data, "backups")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.tar.gz"), []byte("not a backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, "POST", base+"/api/backups/restore", `{"backupName":"broken"}`); code != 500 || !strings.Contains(body, "damaged") {
		t.Fatalf("corrupt restore: %d %s", code, body)
	}
	// Another node's backup.
	other := newTestNode(t, t.TempDir())
	var created struct{ Path string }
	mustJSON(t, "POST", "http://"+other.AdminAddr()+"/api/backups/create", "", 200, &created)
	b, err := os.ReadFile(created.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "foreign.tar.gz"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, "POST", base+"/api/backups/restore", `{"backupName":"foreign.tar.gz"}`); code != 500 || !strings.Contains(body, "another node") {
		t.Fatalf("foreign restore: %d %s", code, body)
	}
	if got := resolvedNames(t, base); len(got) != 1 || got[0] != "stay.p2p" {
		t.Fatalf("state changed by refused restores: %v", got)
	}
	var health map[string]any
	mustJSON(t, "GET", base+"/api/health", "", 200, &health)
}

func count(xs []int, v int) int {
	n := 0
	for _, x := range xs {
		if x == v {
			n++
		}
	}
	return n
}
