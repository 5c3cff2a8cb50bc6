package backup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An archive of a few entries, each deep under folders of its own,
// makes a folder for every level of every name: those folders count
// toward MaxFiles as folder entries do, or a small archive of MaxFiles
// such entries would fill the disk with hundreds of millions of
// folders.
func TestStageCountsParentFolders(t *testing.T) {
	const depth = 100 // up to about 2000 in a name within PATH_MAX
	deep := strings.Repeat("d/", depth)
	entries := required
	for i := 0; i*depth <= MaxFiles; i++ {
		entries = append(entries, [2]string{fmt.Sprintf("plugins/%d/%sf", i, deep), "x"})
	}
	root := t.TempDir()
	dir := filepath.Join(root, "backups")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.tar.gz"), archive(t, goodMeta, entries), 0o600); err != nil {
		t.Fatal(err)
	}
	into := filepath.Join(root, "staged")
	if _, err := Stage(dir, "b", into, "node-a", nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Stage of %d entries making %d folders = %v, want ErrCorrupt", len(entries), len(entries)*depth, err)
	}
	if _, err := os.Stat(into); !os.IsNotExist(err) {
		t.Fatal("staging folder left behind")
	}
}
