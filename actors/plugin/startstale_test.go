package plugin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"peerdns/messages"
)

// A plugin whose manifest changed into one that is refused does not
// start from the manifest read before: start reads the folder again, as
// reload does, and refuses it; once the folder is right it starts.
func TestStartRereadsTheFolder(t *testing.T) {
	dir := t.TempDir()
	p := writePlugin(t, dir, "echo", "echo.p2p", "ok", nil)
	h := newHarness(t, dir, nil)
	h.waitRunning("echo.p2p")
	good, err := os.ReadFile(filepath.Join(p, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	bad := `{"name":"echo","version":"2","domain":"echo.p2p","handler":"/bin/sh"}`
	if err := os.WriteFile(filepath.Join(p, ManifestName), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: "echo.p2p", Op: "reload"}); !errors.Is(r.Err, messages.ErrBadPlugin) {
		t.Fatalf("reload with a bad manifest: %v", r.Err)
	}
	r := ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: "echo.p2p", Op: "start"})
	if !errors.Is(r.Err, messages.ErrBadPlugin) {
		t.Fatalf("start with a bad manifest = %q, %v; want ErrBadPlugin", r.Message, r.Err)
	}
	if got := h.plugin("echo.p2p"); got.Status != messages.PluginStopped || h.table.Lookup("echo.p2p") != nil {
		t.Fatalf("after start with a bad manifest: %s (%s)", got.Status, got.Error)
	}
	if err := os.WriteFile(filepath.Join(p, ManifestName), good, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: "echo.p2p", Op: "start"}); r.Err != nil {
		t.Fatalf("start with the manifest fixed: %v", r.Err)
	}
	h.waitRunning("echo.p2p")
}
