//go:build unix

package plugin

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"peerdns/messages"
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

// A plugin.json swapped for a FIFO between the check and the open (the
// handler owns its folder and may do it in a loop) does not hold
// LoadFolder either.
func TestManifestSwappedForFIFO(t *testing.T) {
	dir := writePlugin(t, t.TempDir(), "swap", "swap.p2p", "ok", nil)
	manifest := filepath.Join(dir, ManifestName)
	good, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if !whileSwappedForFIFO(manifest, good, func() { _, _ = LoadFolder(dir) }) {
		t.Fatal("LoadFolder blocked on a plugin.json swapped for a FIFO")
	}
}

// A plugin's data.db that is a FIFO (a handler may rename one over it
// while it runs) stops that plugin with the reason when it loads; the
// supervisor does not wait in its open for a writer.
func TestPluginDatabaseFIFORefused(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	writePlugin(t, dir, "fifo", "fifo.p2p", "ok", nil)
	writePlugin(t, dir, "echo", "echo.p2p", "ok", nil)
	fifo := filepath.Join(data, "fifo.p2p", "data.db")
	if err := os.MkdirAll(filepath.Dir(fifo), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	h := newHarness(t, dir, func(d *Deps) { d.DataDir = data })
	// Runs before the harness stops: a supervisor held in the open gets
	// its writer.
	t.Cleanup(func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	res, err := h.sys.Root.RequestFuture(h.pid, &messages.GetPlugin{Domain: "fifo.p2p"}, 5*time.Second).Result()
	if err != nil {
		t.Fatalf("the supervisor did not answer: %v", err)
	}
	if p := res.(*messages.GetPluginReply).Plugin; p.Status != messages.PluginStopped || !strings.Contains(p.Error, "regular file") {
		t.Fatalf("fifo.p2p: %s %q, want stopped for its database", p.Status, p.Error)
	}
	h.waitRunning("echo.p2p")
}

// A file of a stopped plugin's data folder swapped for a FIFO while a
// backup lists the folder (any handler may do it in a loop) fails that
// snapshot at worst: it does not wait in the FIFO's open for a writer.
func TestSnapshotFileSwappedForFIFO(t *testing.T) {
	data := t.TempDir()
	folder := filepath.Join(data, "gone.p2p")
	if err := os.MkdirAll(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(folder, "data.db")
	if err := os.WriteFile(target, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &Actor{d: Deps{DataDir: data}, entries: map[string]*entry{}, dying: map[string]*dying{}}
	out := t.TempDir()
	i := 0
	if !whileSwappedForFIFO(target, []byte("x"), func() {
		dir := filepath.Join(out, strconv.Itoa(i))
		i++
		_ = os.Mkdir(dir, 0o700)
		_ = a.snapshot(dir)
	}) {
		t.Fatal("a snapshot blocked on a data file swapped for a FIFO")
	}
}

// whileSwappedForFIFO runs work over and over for 3 s while another
// goroutine swaps target for a FIFO and back (a file of content) as fast
// as it can, as a handler owning the folder may. It reports whether work
// returned within 15 s; when it did not, every FIFO made is opened for
// writing (each keeps a second name for that), which ends a blocked
// open, before it returns.
func whileSwappedForFIFO(target string, content []byte, work func()) bool {
	keep, err := os.MkdirTemp("", "fifos")
	if err != nil {
		return false
	}
	defer os.RemoveAll(keep)
	dir := filepath.Dir(target)
	fifo, file := filepath.Join(dir, "fifo"), filepath.Join(dir, "file")
	stop, swapped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(swapped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := syscall.Mkfifo(fifo, 0o600); err == nil {
				_ = os.Link(fifo, filepath.Join(keep, strconv.Itoa(i)))
				_ = os.Rename(fifo, target)
			}
			if err := os.WriteFile(file, content, 0o600); err == nil {
				_ = os.Rename(file, target)
			}
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
			work()
		}
	}()
	select {
	case <-done:
		close(stop)
		<-swapped
		return true
	case <-time.After(15 * time.Second):
		close(stop)
		<-swapped
		fifos, _ := os.ReadDir(keep)
		for _, f := range fifos {
			if w, err := os.OpenFile(filepath.Join(keep, f.Name()), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
		<-done
		return false
	}
}
