package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// A plugin with a handler runs again after its node restored a backup:
// the handler is still an executable file.
func TestBackupRestoreKeepsPluginHandler(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	installNotes(t, n)
	action(t, n, "notes.p2p", "count", "")
	mustJSON(t, "POST", base+"/api/update-settings", `{"settings":{"LOG_LEVEL":"warn"}}`, 200, nil)
	var created struct{ Path string }
	mustJSON(t, "POST", base+"/api/backups/create", "", 200, &created)
	// A setting changed after the backup tells when the restore is done.
	mustJSON(t, "POST", base+"/api/update-settings", `{"settings":{"LOG_LEVEL":"error"}}`, 200, nil)
	mustJSON(t, "POST", base+"/api/backups/restore", `{"backupName":"`+filepath.Base(created.Path)+`"}`, 200, nil)
	testutil.Eventually(t, 30*time.Second, func() error {
		if code, body := call(t, "GET", base+"/api/settings", ""); code != 200 || !strings.Contains(body, `"LOG_LEVEL":"warn"`) {
			return fmt.Errorf("not restored yet: %d", code)
		}
		code, body := call(t, "GET", base+"/api/plugins/notes.p2p", "")
		if code != 200 {
			return fmt.Errorf("plugin after the restore: %d %s", code, body)
		}
		if p := pluginOn(t, n, "notes.p2p"); p.Status != "loaded" {
			return fmt.Errorf("plugin after the restore: %s (%s)", p.Status, p.Error)
		}
		return nil
	})
	action(t, n, "notes.p2p", "count", "")
	st, err := os.Stat(filepath.Join(n.orig.Data, "plugins", "notes", "notes"))
	if err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Fatalf("handler after the restore: %v, %v", st.Mode(), err)
	}
}

// A staging folder an earlier process left (killed while it staged a
// restore) is removed when the node starts; the rest of the data folder
// is untouched.
func TestStartRemovesLeftStaging(t *testing.T) {
	dir := t.TempDir()
	left := filepath.Join(dir, ".restore-0123456789ab")
	if err := os.MkdirAll(filepath.Join(left, "plugins", "p"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "plugins", "p", "blob"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(dir, "keep.txt")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	newTestNode(t, dir)
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("staging folder still there: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatal(err)
	}
}
