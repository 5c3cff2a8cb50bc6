package node

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the example plugin built for the plugin tests when
// they end.
func TestMain(m *testing.M) {
	code := m.Run()
	if notesBin != "" {
		os.RemoveAll(filepath.Dir(notesBin))
	}
	os.Exit(code)
}
