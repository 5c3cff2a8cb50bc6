package plugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/store"
	"peerdns/messages"
)

// Snapshots taken while a handler writes as fast as it can are each a
// consistent state: the copy opens without buntdb cutting a torn record,
// and a copy holding last=n holds every k/0..k/n (the handler puts k/n
// before last=n). A plugin that is stopped has its file copied.
func TestSnapshotDuringConcurrentWrites(t *testing.T) {
	dir := t.TempDir()
	writePlugin(t, dir, "seq", "seq.p2p", "ok", nil)
	h := newHarness(t, dir, nil)
	rt := h.waitRunning("seq.p2p")

	var wrote atomic.Int64
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := rt.Handle(ctx, &HandleRequest{Method: "POST", Path: "/seq/" + strconv.Itoa(i)})
			cancel()
			if err != nil || resp.Status != 200 {
				done <- fmt.Errorf("write %d: %v %v", i, resp, err)
				return
			}
			wrote.Store(int64(i + 1))
		}
	}()
	check := func(snap string) (last int) {
		t.Helper()
		path := filepath.Join(snap, "seq.p2p", "data.db")
		before, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		db, err := store.Open(path, store.Options{})
		if err != nil {
			t.Fatalf("snapshot does not open: %v", err)
		}
		defer db.Close()
		after, _ := os.Stat(path)
		if after.Size() != before.Size() {
			t.Fatalf("snapshot had a torn record: %d bytes, %d after buntdb's repair", before.Size(), after.Size())
		}
		v, err := db.Get("last")
		if err != nil {
			return -1
		}
		last, _ = strconv.Atoi(v)
		for i := 0; i <= last; i++ {
			if _, err := db.Get("k/" + strconv.Itoa(i)); err != nil {
				t.Fatalf("snapshot holds last=%d but not k/%d: not a consistent state", last, i)
			}
		}
		return last
	}
	prev := -1
	for round := 0; round < 10; round++ {
		// Wait for some writes between snapshots.
		for target := wrote.Load() + 20; wrote.Load() < target; {
			select {
			case err := <-done:
				t.Fatal(err)
			case <-time.After(time.Millisecond):
			}
		}
		snap := t.TempDir()
		r := ask[*SnapshotDatabasesReply](t, h, &SnapshotDatabases{Dir: snap})
		if r.Err != nil || r.Files != 1 {
			t.Fatalf("snapshot: %d files, %v", r.Files, r.Err)
		}
		last := check(snap)
		if last < prev {
			t.Fatalf("snapshot %d holds last=%d, the one before %d", round, last, prev)
		}
		prev = last
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("10 snapshots during %d writes, the last one up to write %d", wrote.Load(), prev)

	// Stopped: its database is closed, the file is copied.
	if r := ask[*SnapshotDatabasesReply](t, h, &SnapshotDatabases{Dir: t.TempDir()}); r.Err != nil {
		t.Fatal(r.Err)
	}
	stopPlugin(t, h, "seq.p2p")
	snap := t.TempDir()
	if r := ask[*SnapshotDatabasesReply](t, h, &SnapshotDatabases{Dir: snap}); r.Err != nil || r.Files != 1 {
		t.Fatalf("snapshot of a stopped plugin: %d files, %v", r.Files, r.Err)
	}
	if last := check(snap); last < prev {
		t.Fatalf("stopped plugin's copy holds last=%d, an earlier snapshot %d", last, prev)
	}
}

func stopPlugin(t *testing.T, h *harness, domain string) {
	t.Helper()
	if r := ask[*messages.ControlPluginReply](t, h, &messages.ControlPlugin{Domain: domain, Op: "stop"}); r.Err != nil {
		t.Fatal(r.Err)
	}
}
