package backup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"peerdns/internal/testutil"
)

// Staging a sound backup on a full disk fails with the disk's error
// (ENOSPC, which the admin API answers 507), not as a damaged backup,
// and leaves no staging folder.
func TestStageFullDiskIsNotCorrupt(t *testing.T) {
	disk := testutil.SmallDisk(t, "1m")
	dir := filepath.Join(t.TempDir(), "backups")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 2<<20) // compresses well, unpacks past the disk
	body := archive(t, goodMeta, append(required, [2]string{"plugins/p/blob", big}))
	if err := os.WriteFile(filepath.Join(dir, "b.tar.gz"), body, 0o600); err != nil {
		t.Fatal(err)
	}
	into := filepath.Join(disk.Dir, "staged")
	_, err := Stage(dir, "b", into, "node-a", nil)
	if err == nil || errors.Is(err, ErrCorrupt) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Stage on a full disk = %v; want ENOSPC, not ErrCorrupt", err)
	}
	if _, err := os.Stat(into); !os.IsNotExist(err) {
		t.Fatal("staging folder left behind")
	}
}
