//go:build unix

package store

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A store file holds secrets (node.db keeps tunnel servers' key seeds),
// so a new one is readable by its owner only, whatever the umask and
// even in a folder others may list (a data folder made beforehand with
// mkdir, 0755).
func TestNewFileOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "node.db")
	db, err := Open(path, Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Set("tunnel:server:a", `{"seed":"secret"}`); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		t.Fatalf("new store file mode = %v, want no access for group or others", perm)
	}
}
