package panel_test

import (
	"os"
	"testing"
)

// TestMain removes the temp folder of screenshots when the tests end
// ($PANEL_SCREENSHOTS keeps them where asked).
func TestMain(m *testing.M) {
	code := m.Run()
	if shotPath != "" {
		os.RemoveAll(shotPath)
	}
	os.Exit(code)
}
