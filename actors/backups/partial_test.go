package backups

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"peerdns/internal/backup"
)

// crashChild, set in a child's environment, is the data folder in which
// the child test process writes a backup that never ends, for its parent
// to kill.
const crashChild = "PEERDNS_REVIEW_CRASH_CREATE"

// A backup the process was killed while writing leaves its partial
// archive in DATA/backups (no backup name lists, deletes or prunes it:
// up to internal/backup's MaxTotal a crash); the next start's
// RemoveStaging removes it with the other leftovers of an earlier run.
func TestRemoveStagingPartialBackup(t *testing.T) {
	if data := os.Getenv(crashChild); data != "" {
		_, err := backup.Create(filepath.Join(data, "backups"), 10, "node-a", "test", time.Now(), []backup.Source{{
			Name: "ledger.db",
			Write: func(w io.Writer) error {
				if _, err := w.Write(make([]byte, 1<<20)); err != nil {
					return err
				}
				fmt.Println("writing")
				select {} // killed here
			},
		}})
		t.Fatalf("the backup ended: %v", err)
	}
	data := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRemoveStagingPartialBackup$")
	cmd.Env = append(os.Environ(), crashChild+"="+data, "TMPDIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	defer cmd.Wait()
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "writing" {
	}
	must(t, cmd.Process.Kill())
	_ = cmd.Wait()
	partial, _ := filepath.Glob(filepath.Join(data, "backups", ".partial-*"))
	if len(partial) == 0 {
		t.Fatal("the killed backup left no partial archive: the test did not reach the write")
	}
	if _, err := RemoveStaging(data); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(data, "backups", ".partial-*")); len(left) != 0 {
		t.Fatalf("a killed backup's partial archive is left after RemoveStaging: %v", left)
	}
}
