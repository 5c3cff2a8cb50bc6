//go:build unix

package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A plugin.json that is a FIFO is refused at once: reading it would hold
// the plugins supervisor until someone writes to it.
func TestManifestFIFORefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fifo")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, ManifestName), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := LoadFolder(dir)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("LoadFolder = %v, want a refusal", err)
		}
	case <-time.After(10 * time.Second):
		if f, err := os.OpenFile(filepath.Join(dir, ManifestName), os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("LoadFolder blocked on a FIFO named plugin.json")
	}
}
