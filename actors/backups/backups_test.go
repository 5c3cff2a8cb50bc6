package backups

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/plugin"
	"peerdns/internal/backup"
	"peerdns/internal/store"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

// harness is one node's data folder with its two stores, a real plugins
// supervisor over it and the backups actor.
type harness struct {
	t       *testing.T
	data    string
	sys     *actor.ActorSystem
	ledger  *store.DB
	node    *store.DB
	pid     *actor.PID
	c       Client
	restart *restarter
	log     *testutil.LogBuffer
}

func newHarness(t *testing.T, nodeID string, tune func(*Deps)) *harness {
	t.Helper()
	h := &harness{t: t, data: t.TempDir(), log: &testutil.LogBuffer{}}
	h.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(h.sys.Shutdown)
	h.ledger = h.open("ledger.db")
	h.node = h.open("node.db")
	must(t, os.WriteFile(filepath.Join(h.data, "identity.key"), []byte("key of "+nodeID+"\n"), 0o600))
	must(t, os.MkdirAll(filepath.Join(h.data, "plugin-data", "x.p2p"), 0o700))
	must(t, os.WriteFile(filepath.Join(h.data, "plugin-data", "x.p2p", "data.db"), []byte("plugin data\n"), 0o600))
	must(t, os.MkdirAll(filepath.Join(h.data, "ca"), 0o700))
	must(t, os.WriteFile(filepath.Join(h.data, "ca", "root.pem"), []byte("root\n"), 0o600))
	log := slog.New(slog.NewTextHandler(h.log, nil))
	plugins, err := h.sys.Root.SpawnNamed(plugin.Props(plugin.Deps{
		Dir: filepath.Join(h.data, "plugins"), DataDir: filepath.Join(h.data, "plugin-data"),
		Store: h.node, PeerID: nodeID, Table: &plugin.Table{}, Log: log,
	}), "plugins")
	must(t, err)
	d := Deps{Data: h.data, NodeID: nodeID, Version: "test", Ledger: h.ledger, Node: h.node, Plugins: plugins,
		Check: -1, Log: log}
	h.restart = &restarter{h: h, held: make(chan struct{}, 4)}
	d.Restart = h.restart
	if tune != nil {
		tune(&d)
	}
	h.restart.d = d
	h.pid, err = h.sys.Root.SpawnNamed(Props(d), "backups")
	must(t, err)
	// The actor stops (waiting for its jobs) before the stores close.
	t.Cleanup(func() { _ = h.sys.Root.StopFuture(h.pid).Wait() })
	h.c = Client{Root: h.sys.Root, PID: h.pid, Timeout: 10 * time.Second, JobTimeout: 30 * time.Second}
	return h
}

// restarter is the process owner's side of a restore here: StopParts
// stops the backups actor and StartParts spawns it again, as the
// composition root does with every part of the node. It answers the
// errors in fail first, records the claim DATA/ledger.db holds at each
// start, and gets a value on held after each Hold. With gate set, Hold
// waits for it to close first.
type restarter struct {
	h      *harness
	d      Deps
	fail   []error
	stops  int
	starts []string
	fatal  error
	held   chan struct{}
	gate   chan struct{}
}

func (r *restarter) Hold(f func()) bool {
	if r.gate != nil {
		<-r.gate
	}
	f()
	r.held <- struct{}{}
	return true
}

func (r *restarter) StopParts() {
	r.stops++
	_ = r.h.sys.Root.StopFuture(r.h.pid).Wait()
}

func (r *restarter) StartParts() error {
	db, err := store.Open(filepath.Join(r.h.data, "ledger.db"), store.Options{})
	if err != nil {
		return err
	}
	claim, _ := db.Get("claim")
	if err := db.Close(); err != nil {
		return err
	}
	r.starts = append(r.starts, claim)
	if len(r.fail) > 0 {
		err, r.fail = r.fail[0], r.fail[1:]
		return err
	}
	pid, err := r.h.sys.Root.SpawnNamed(Props(r.d), "backups")
	if err != nil {
		return err
	}
	r.h.pid, r.h.c.PID = pid, pid
	return nil
}

func (r *restarter) Fatal(err error) { r.fatal = err }

// restored waits for a restore to end.
func (h *harness) restored() {
	h.t.Helper()
	select {
	case <-h.restart.held:
	case <-time.After(30 * time.Second):
		h.t.Fatal("the staged backup was not swapped in")
	}
}

// resets subscribes to the system-reset hints a restore publishes.
func (h *harness) resets() chan struct{} {
	ch := make(chan struct{}, 4)
	sub := h.sys.EventStream.Subscribe(func(ev any) {
		if m, ok := ev.(*messages.Hint); ok && m.Type == messages.HintSystemReset {
			ch <- struct{}{}
		}
	})
	h.t.Cleanup(func() { h.sys.EventStream.Unsubscribe(sub) })
	return ch
}

func (h *harness) open(name string) *store.DB {
	h.t.Helper()
	db, err := store.Open(filepath.Join(h.data, name), store.Options{})
	must(h.t, err)
	h.t.Cleanup(func() { db.Close() })
	return db
}

func (h *harness) list() []backup.Info {
	h.t.Helper()
	l, err := h.c.ListBackups()
	must(h.t, err)
	return l
}

func (h *harness) tick(now time.Time) bool {
	h.t.Helper()
	res, err := h.sys.Root.RequestFuture(h.pid, &Tick{Now: now}, 10*time.Second).Result()
	must(h.t, err)
	return res.(*TickReply).Started
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A backup holds both stores (as their snapshots), the identity, the CA
// and the plugin databases the plugins supervisor copied; it is listed,
// its metadata read and it is deleted; retention keeps the newest ones.
func TestCreateListMetadataDelete(t *testing.T) {
	h := newHarness(t, "node-a", nil)
	must(t, h.ledger.Set("claim", "one"))
	path, err := h.c.CreateBackup()
	must(t, err)
	if filepath.Dir(path) != filepath.Join(h.data, "backups") || !strings.HasSuffix(path, backup.Ext) {
		t.Fatalf("CreateBackup() = %q, want an archive in DATA/backups", path)
	}
	list := h.list()
	if len(list) != 1 || list[0].Name != filepath.Base(path) || list[0].FileCount < 5 {
		t.Fatalf("ListBackups() = %+v", list)
	}
	meta, err := h.c.BackupMetadata(list[0].Name)
	must(t, err)
	if meta.NodeID != "node-a" || meta.Version != "test" {
		t.Fatalf("metadata: %+v", meta)
	}
	var names []string
	for _, f := range meta.Files {
		names = append(names, f.Name)
	}
	for _, want := range []string{"ledger.db", "node.db", "identity.key", "ca/root.pem", "plugin-data/x.p2p/data.db"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Fatalf("backup files %v lack %s", names, want)
		}
	}

	// Retention: with 1 kept, a new backup replaces the old one.
	h.sys.Root.Send(h.pid, &SetRetention{Keep: 1})
	second, err := h.c.CreateBackup()
	must(t, err)
	if list := h.list(); len(list) != 1 || list[0].Name != filepath.Base(second) {
		t.Fatalf("after a backup with retention 1: %+v, want only %s", list, filepath.Base(second))
	}

	if _, err := h.c.BackupMetadata("../identity.key"); !errors.Is(err, backup.ErrBadName) {
		t.Fatalf("metadata of a path: %v, want ErrBadName", err)
	}
	if err := h.c.DeleteBackup("nope"); !errors.Is(err, backup.ErrNotFound) {
		t.Fatalf("delete of an unknown backup: %v, want ErrNotFound", err)
	}
	must(t, h.c.DeleteBackup(filepath.Base(second)))
	if list := h.list(); len(list) != 0 {
		t.Fatalf("after delete: %+v", list)
	}
	if !strings.Contains(h.log.String(), "backup deleted") {
		t.Fatalf("no log line for the delete: %s", h.log.String())
	}
}

// Automatic backups: none while the interval is 0; on a tick with no
// backup, one; not again before the interval passed since the newest;
// again once it did. The actor's own ticker sends the ticks.
func TestAutomaticBackups(t *testing.T) {
	h := newHarness(t, "node-a", nil)
	now := time.Now()
	if h.tick(now) {
		t.Fatal("a tick with BACKUP_INTERVAL 0 started a backup")
	}
	h.sys.Root.Send(h.pid, &SetInterval{Every: time.Hour})
	if !h.tick(now) {
		t.Fatal("a tick with no backup did not start one")
	}
	var newest time.Time
	testutil.Eventually(t, 10*time.Second, func() error {
		l := h.list()
		if len(l) != 1 {
			return fmt.Errorf("%d backups", len(l))
		}
		var err error
		newest, err = time.Parse(time.RFC3339Nano, l[0].Timestamp)
		return err
	})
	// The automatic backup's end reaches the actor after the file is
	// there: poll until a tick at the interval's end starts the next
	// (due's table below has the times in between).
	testutil.Eventually(t, 10*time.Second, func() error {
		if !h.tick(newest.Add(time.Hour)) {
			return errors.New("no backup started an interval after the newest")
		}
		return nil
	})
	testutil.Eventually(t, 10*time.Second, func() error {
		if l := h.list(); len(l) != 2 {
			return fmt.Errorf("%d backups", len(l))
		}
		return nil
	})

	// The ticker.
	ticked := newHarness(t, "node-b", func(d *Deps) { d.Check = 10 * time.Millisecond; d.Every = time.Hour })
	testutil.Eventually(t, 10*time.Second, func() error {
		if l := ticked.list(); len(l) != 1 {
			return fmt.Errorf("%d backups from the ticker", len(l))
		}
		return nil
	})
}

// A backup dated in the future (written while the clock was a year
// ahead, then set right) does not stop automatic backups: a tick with
// it as the newest starts one (due's table has the next one after).
func TestAutomaticBackupsAfterAFutureDatedBackup(t *testing.T) {
	h := newHarness(t, "node-a", func(d *Deps) { d.Every = time.Hour })
	now := time.Now()
	if _, err := backup.Create(filepath.Join(h.data, "backups"), 10, "node-a", "test", now.AddDate(1, 0, 0), nil); err != nil {
		t.Fatal(err)
	}
	if !h.tick(now) {
		t.Fatal("a backup dated a year ahead stopped the automatic backups")
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if l := h.list(); len(l) != 2 {
			return fmt.Errorf("%d backups", len(l))
		}
		return nil
	})
}

func TestDue(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	newest := []backup.Info{{Timestamp: at.Format(time.RFC3339Nano)}}
	for _, tt := range []struct {
		name  string
		every time.Duration
		list  []backup.Info
		now   time.Time
		want  bool
	}{
		{"off", 0, nil, at, false},
		{"no backup yet", time.Hour, nil, at, true},
		{"just written", time.Hour, newest, at, false},
		{"half the interval", time.Hour, newest, at.Add(30 * time.Minute), false},
		{"the interval", time.Hour, newest, at.Add(time.Hour), true},
		{"clock went back", time.Hour, newest, at.Add(-30 * time.Minute), false},
		{"newest a year ahead", time.Hour, newest, at.AddDate(-1, 0, 0), true},
		{"newest a year ahead, one just written", time.Hour,
			[]backup.Info{{Timestamp: at.AddDate(1, 0, 0).Format(time.RFC3339Nano)}, newest[0]}, at.Add(time.Minute), false},
		{"newest time unreadable", time.Hour, []backup.Info{{Timestamp: "?"}}, at, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := (policy{keep: 1, every: tt.every}).due(tt.now, tt.list); got != tt.want {
				t.Fatalf("due(%v, %v) = %v, want %v", tt.now, tt.list, got, tt.want)
			}
		})
	}
}

// A restore is refused, with the reason, for an unknown backup, a
// damaged archive, another node's backup (by its metadata or by its
// identity.key) and a bad name; nothing is handed on. A sound one is
// staged, the current state is backed up first, and the staged folder
// holds the backup's stores.
func TestRestore(t *testing.T) {
	h := newHarness(t, "node-a", nil)
	must(t, h.ledger.Set("claim", "before"))
	path, err := h.c.CreateBackup()
	must(t, err)
	must(t, h.ledger.Set("claim", "after"))
	dir := filepath.Join(h.data, "backups")

	must(t, os.WriteFile(filepath.Join(dir, "broken.tar.gz"), []byte("not a backup"), 0o600))
	other := newHarness(t, "node-b", nil)
	foreign, err := other.c.CreateBackup()
	must(t, err)
	b, err := os.ReadFile(foreign)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "foreign.tar.gz"), b, 0o600))
	// Same node id in the metadata, another key.
	twin := newHarness(t, "node-a", nil)
	must(t, os.WriteFile(filepath.Join(twin.data, "identity.key"), []byte("another key\n"), 0o600))
	cloned, err := twin.c.CreateBackup()
	must(t, err)
	b, err = os.ReadFile(cloned)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "twin.tar.gz"), b, 0o600))

	for _, tt := range []struct {
		name string
		want error
	}{
		{"nope", backup.ErrNotFound},
		{"../x", backup.ErrBadName},
		{"broken", backup.ErrCorrupt},
		{"foreign.tar.gz", backup.ErrForeign},
		{"twin", backup.ErrForeign},
	} {
		if err := h.c.RestoreBackup(tt.name); !errors.Is(err, tt.want) {
			t.Fatalf("RestoreBackup(%q) = %v, want %v", tt.name, err, tt.want)
		}
	}
	if l := h.list(); len(l) != 3 { // the damaged one is not listed
		t.Fatalf("refused restores wrote backups: %+v", l)
	}

	resets := h.resets()
	name := filepath.Base(path)
	must(t, h.c.RestoreBackup(name))
	h.restored()
	if len(h.restart.held) != 0 {
		t.Fatalf("refused restores were swapped in: %d", len(h.restart.held))
	}
	// One reset hint, one stop, one start on the backup's ledger.db,
	// which is now the data folder's; the staging folder and the state
	// moved aside are gone.
	if len(resets) != 1 || h.restart.stops != 1 || len(h.restart.starts) != 1 || h.restart.starts[0] != "before" || h.restart.fatal != nil {
		t.Fatalf("restore: %d resets, %d stops, starts %q, fatal %v", len(resets), h.restart.stops, h.restart.starts, h.restart.fatal)
	}
	if left, _ := filepath.Glob(filepath.Join(h.data, ".*-*")); len(left) != 0 {
		t.Fatalf("left in the data folder: %v", left)
	}
	if l := h.list(); len(l) != 4 {
		t.Fatalf("want the current state backed up before the restore: %+v", l)
	}
	if b, err := os.ReadFile(filepath.Join(h.data, "identity.key")); err != nil || string(b) != "key of node-a\n" {
		t.Fatalf("identity.key after the restore: %q, %v", b, err)
	}
}

// A restore replaces DATA/plugins kept behind a link with a folder of
// DATA and leaves the link's target as it was (the package doc says so).
func TestRestoreReplacesALink(t *testing.T) {
	h := newHarness(t, "node-a", nil)
	target := filepath.Join(t.TempDir(), "plugins")
	must(t, os.MkdirAll(target, 0o700))
	must(t, os.WriteFile(filepath.Join(target, "note.txt"), []byte("backed up\n"), 0o600))
	must(t, os.Symlink(target, filepath.Join(h.data, "plugins")))
	path, err := h.c.CreateBackup()
	must(t, err)
	must(t, os.WriteFile(filepath.Join(target, "note.txt"), []byte("current\n"), 0o600))
	must(t, h.c.RestoreBackup(filepath.Base(path)))
	h.restored()
	if h.restart.fatal != nil {
		t.Fatal(h.restart.fatal)
	}
	st, err := os.Lstat(filepath.Join(h.data, "plugins"))
	if err != nil || !st.IsDir() {
		t.Fatalf("DATA/plugins after the restore: %v, %v; want a folder", st, err)
	}
	if b, err := os.ReadFile(filepath.Join(h.data, "plugins", "note.txt")); err != nil || string(b) != "backed up\n" {
		t.Fatalf("restored note.txt = %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(target, "note.txt")); err != nil || string(b) != "current\n" {
		t.Fatalf("the link's target note.txt = %q, %v; want it as it was", b, err)
	}
}

// A restore asked while another one runs is refused: it would be
// swapped in over the first, its system-reset hint published on the
// actor system the first one's restart shut down.
func TestRestoreWhileRestoring(t *testing.T) {
	h := newHarness(t, "node-a", nil)
	must(t, h.ledger.Set("claim", "first"))
	first, err := h.c.CreateBackup()
	must(t, err)
	must(t, h.ledger.Set("claim", "second"))
	second, err := h.c.CreateBackup()
	must(t, err)
	must(t, h.ledger.Set("claim", "current"))
	resets := h.resets()
	h.restart.gate = make(chan struct{})
	must(t, h.c.RestoreBackup(filepath.Base(first)))
	// The first is answered and waits to be swapped in.
	if err := h.c.RestoreBackup(filepath.Base(second)); !errors.Is(err, errRestoring) {
		close(h.restart.gate)
		h.restored()
		t.Fatalf("second RestoreBackup = %v, want %v", err, errRestoring)
	}
	close(h.restart.gate)
	h.restored()
	if r := h.restart; len(resets) != 1 || r.stops != 1 || len(r.starts) != 1 || r.starts[0] != "first" || r.fatal != nil {
		t.Fatalf("restore: %d resets, %d stops, starts %q, fatal %v", len(resets), r.stops, r.starts, r.fatal)
	}
	// The actor spawned by the restart takes restores again.
	h.restart.gate = nil
	must(t, h.c.RestoreBackup(filepath.Base(second)))
	h.restored()
	if r := h.restart; len(r.starts) != 2 || r.starts[1] != "second" {
		t.Fatalf("restore after the restart: starts %q", r.starts)
	}
}

// A restored state that does not start is moved to
// DATA/.failed-restore-<time> and the previous state goes back; the node
// starts on it and keeps running.
func TestRestoreRollsBack(t *testing.T) {
	h := newHarness(t, "node-a", nil)
	must(t, h.ledger.Set("claim", "before"))
	path, err := h.c.CreateBackup()
	must(t, err)
	must(t, h.ledger.Set("claim", "after"))
	h.restart.fail = []error{errors.New("the restored state does not start")}
	must(t, h.c.RestoreBackup(filepath.Base(path)))
	h.restored()
	r := h.restart
	if r.stops != 2 || len(r.starts) != 2 || r.starts[0] != "before" || r.starts[1] != "after" || r.fatal != nil {
		t.Fatalf("rollback: %d stops, starts %q, fatal %v", r.stops, r.starts, r.fatal)
	}
	failed, _ := filepath.Glob(filepath.Join(h.data, ".failed-restore-*"))
	if len(failed) != 1 {
		t.Fatalf("want the state that failed kept: %v", failed)
	}
	db, err := store.Open(filepath.Join(failed[0], "ledger.db"), store.Options{})
	must(t, err)
	defer db.Close()
	if v, err := db.Get("claim"); err != nil || v != "before" {
		t.Fatalf("kept ledger.db: claim = %q, %v; want the backup's", v, err)
	}
	if left, _ := filepath.Glob(filepath.Join(h.data, ".pre-restore-*")); len(left) != 0 {
		t.Fatalf("the previous state was not put back: %v", left)
	}
	if !strings.Contains(h.log.String(), "the previous state is back") {
		t.Fatalf("log: %s", h.log.String())
	}
}

// swap moves the current entries aside and the staged ones in; when a
// move fails it undoes the ones it made.
func TestSwap(t *testing.T) {
	root := t.TempDir()
	data, from := filepath.Join(root, "data"), filepath.Join(root, "staged")
	write := func(path, s string) {
		must(t, os.MkdirAll(filepath.Dir(path), 0o700))
		must(t, os.WriteFile(path, []byte(s), 0o600))
	}
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			return "(absent)"
		}
		return string(b)
	}
	write(filepath.Join(data, "ledger.db"), "old ledger")
	write(filepath.Join(data, "node.db"), "old node")
	write(filepath.Join(data, "identity.key"), "key")
	write(filepath.Join(data, "ca", "root.pem"), "old ca")
	write(filepath.Join(from, "ledger.db"), "new ledger")
	write(filepath.Join(from, "node.db"), "new node")
	write(filepath.Join(from, "plugins", "p", "plugin.json"), "{}")

	// A failing move (aside/node.db is a folder that is not empty) moves
	// nothing.
	blocked := filepath.Join(root, "blocked")
	write(filepath.Join(blocked, "node.db", "x"), "x")
	if err := swap(data, from, blocked); err == nil {
		t.Fatal("swap onto a blocked aside folder succeeded")
	}
	if got := read(filepath.Join(data, "ledger.db")) + "|" + read(filepath.Join(data, "ca", "root.pem")); got != "old ledger|old ca" {
		t.Fatalf("after a failed swap: %s", got)
	}

	aside := filepath.Join(root, "aside")
	must(t, swap(data, from, aside))
	for path, want := range map[string]string{
		filepath.Join(data, "ledger.db"):                   "new ledger",
		filepath.Join(data, "node.db"):                     "new node",
		filepath.Join(data, "identity.key"):                "key",
		filepath.Join(data, "plugins", "p", "plugin.json"): "{}",
		filepath.Join(data, "ca", "root.pem"):              "(absent)",
		filepath.Join(aside, "ledger.db"):                  "old ledger",
		filepath.Join(aside, "ca", "root.pem"):             "old ca",
	} {
		if got := read(path); got != want {
			t.Fatalf("%s = %q, want %q", path, got, want)
		}
	}
}
