package backups

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// crashWorkChild, set in a child's environment, has the child test
// process write a backup through the actor whose ledger snapshot never
// ends, for its parent to kill.
const crashWorkChild = "PEERDNS_REVIEW_CRASH_WORK"

// stuckSnapshot is a store whose snapshot says so and never ends.
type stuckSnapshot struct{}

func (stuckSnapshot) Snapshot(w io.Writer) error {
	if _, err := w.Write(make([]byte, 1<<20)); err != nil {
		return err
	}
	fmt.Println("writing")
	select {} // killed here
}

// A backup the process was killed while writing leaves nothing the next
// start's RemoveStaging does not remove: not the archive, nor the
// plugin databases' copy, nor the stores' snapshots rendered before the
// archive is written (up to internal/backup's MaxTotal each crash). They
// were made in the system's temporary folder, which no start looks at.
func TestRemoveStagingKilledBackupWork(t *testing.T) {
	if os.Getenv(crashWorkChild) != "" {
		h := newHarness(t, "node-a", func(d *Deps) { d.Ledger = stuckSnapshot{} })
		fmt.Println("data", h.data)
		_, err := h.c.CreateBackup()
		t.Fatalf("the backup ended: %v", err)
	}
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRemoveStagingKilledBackupWork$")
	cmd.Env = append(os.Environ(), crashWorkChild+"=1", "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	defer cmd.Wait()
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	var data string
	for sc.Scan() && sc.Text() != "writing" {
		if d, ok := strings.CutPrefix(sc.Text(), "data "); ok {
			data = d
		}
	}
	must(t, cmd.Process.Kill())
	_ = cmd.Wait()
	if data == "" {
		t.Fatal("the child named no data folder")
	}
	if _, err := RemoveStaging(data); err != nil {
		t.Fatal(err)
	}
	// The child's data folder is under tmp (its t.TempDir); nothing else
	// of it may be.
	err = filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == data {
			return filepath.SkipDir
		}
		if rel, _ := filepath.Rel(p, data); !filepath.IsLocal(rel) {
			t.Errorf("the killed backup left %s outside its data folder", p)
		}
		return nil
	})
	must(t, err)
	left, err := os.ReadDir(filepath.Join(data, "backups"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("the killed backup left backups/%s after RemoveStaging", e.Name())
	}
}
