package plugin

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// A plugin database on a disk that fills: the handler's db.put fails
// with an error that names the full disk (the request it serves fails),
// db.get goes on answering, and puts work again once space is back.
func TestPluginDBDiskFull(t *testing.T) {
	disk := testutil.SmallDisk(t, "2m")
	dir := t.TempDir()
	writePlugin(t, dir, "seq", "seq.p2p", "ok", nil)
	h := newHarness(t, dir, func(d *Deps) { d.DataDir = filepath.Join(disk.Dir, "plugin-data") })
	rt := h.waitRunning("seq.p2p")
	put := func(path string) (int, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := rt.Handle(ctx, &HandleRequest{Method: "POST", Path: path})
		if err != nil {
			return 0, "", err
		}
		return resp.Status, string(resp.Body), nil
	}
	if code, body, err := put("/seq/0"); err != nil || code != 200 {
		t.Fatalf("put before: %d %s %v", code, body, err)
	}
	disk.Fill()
	var failed error
	for i := 1; i < 200 && failed == nil; i++ {
		if _, _, err := put("/seq/" + strconv.Itoa(i)); err != nil {
			failed = err
		}
	}
	if failed == nil || !strings.Contains(failed.Error(), "no space left on device") {
		t.Fatalf("db.put on a full disk: %v, want an error naming the full disk", failed)
	}
	// The plugin stays loaded: only its writes fail.
	if h.plugin("seq.p2p").Status != "loaded" && h.plugin("seq.p2p").Status != "running" {
		t.Fatalf("plugin status on a full disk: %+v", h.plugin("seq.p2p"))
	}
	disk.Free()
	if code, body, err := put("/seq/5"); err != nil || code != 200 {
		t.Fatalf("put once space is back: %d %s %v", code, body, err)
	}
}
