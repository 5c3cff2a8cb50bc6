//go:build unix

package backup

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A backup folder whose metadata.json is a FIFO does not hold List (the
// backups actor answers it in its Receive) forever.
func TestFolderMetadataFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "fifo"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo", MetaName), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := List(dir)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		// Unblock the reader so the test process can end.
		if f, err := os.OpenFile(filepath.Join(dir, "fifo", MetaName), os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("List blocked on a FIFO named metadata.json")
	}
}
