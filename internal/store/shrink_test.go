package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/buntdb"

	"peerdns/internal/testutil"
)

// shrinkChildEnv makes the test binary, run again under strace by
// TestShrinkOrderOnDisk, do one shrink on the store at its value.
const shrinkChildEnv = "PEERDNS_STORE_SHRINK_CHILD"

// Every shrink, explicit or automatic, fsyncs the copy before it renames
// it over the file and fsyncs the folder after, before the next commit
// (strace shows the order of the system calls).
func TestShrinkOrderOnDisk(t *testing.T) {
	if path := os.Getenv(shrinkChildEnv); path != "" {
		shrinkChild(t, path, os.Getenv(shrinkChildEnv+"_MODE"))
		return
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("needs strace to see the order of fsync and rename (apt-get install strace)")
	}
	for _, mode := range []string{"explicit", "auto"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "s.db")
			trace := filepath.Join(t.TempDir(), "trace")
			cmd := exec.Command(strace, "-f", "-qq", "-y", "-e", "signal=none", "-o", trace,
				"-e", "trace=fsync,fdatasync,rename,renameat,renameat2,pwrite64,write",
				os.Args[0], "-test.run=^TestShrinkOrderOnDisk$", "-test.count=1")
			cmd.Env = append(os.Environ(), shrinkChildEnv+"="+path, shrinkChildEnv+"_MODE="+mode)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("child under strace: %v\n%s", err, out)
			}
			checkShrinkOrder(t, trace, dir, path)
		})
	}
}

func shrinkChild(t *testing.T, path, mode string) {
	o := Options{Durable: true, ManualShrink: true}
	if mode == "auto" {
		autoShrinkMinSize, autoShrinkEvery = 64<<10, 10*time.Millisecond
		o.ManualShrink = false
	}
	db, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("v", 16<<10)
	for i := range 20 {
		if err := db.Set("k", fmt.Sprint(i, big)); err != nil {
			t.Fatal(err)
		}
	}
	if mode == "auto" {
		testutil.Eventually(t, 10*time.Second, func() error {
			if db.FileSize() > 64<<10 {
				return fmt.Errorf("file is %d bytes, not shrunk", db.FileSize())
			}
			return nil
		})
	} else if err := db.Shrink(); err != nil {
		t.Fatal(err)
	}
	if err := db.Set("after", "x"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkShrinkOrder reads strace's output: the rename of a copy over path
// comes after an fsync of that copy, and an fsync of the folder comes
// after the rename and before the write of the next commit to path.
func checkShrinkOrder(t *testing.T, trace, dir, path string) {
	t.Helper()
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	renameRE := regexp.MustCompile(`rename[a-z0-9]*\((?:AT_FDCWD(?:<[^>]*>)?, )?"([^"]+)", (?:AT_FDCWD(?:<[^>]*>)?, )?"` + regexp.QuoteMeta(path) + `"`)
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	renamed := -1
	var copyPath string
	for i, l := range lines {
		if m := renameRE.FindStringSubmatch(l); m != nil {
			renamed, copyPath = i, m[1]
			break
		}
	}
	if renamed < 0 {
		t.Fatalf("no rename over %s in the trace:\n%s", path, strings.Join(lines, "\n"))
	}
	fsyncOf := func(l, name string) bool {
		return regexp.MustCompile(`f(data)?sync\(\d+<` + regexp.QuoteMeta(name) + `>`).MatchString(l)
	}
	copySynced := false
	for _, l := range lines[:renamed] {
		if fsyncOf(l, copyPath) {
			copySynced = true
		}
	}
	if !copySynced {
		t.Errorf("the copy %s was renamed over the file without an fsync before:\n%s", copyPath, strings.Join(lines[:renamed+1], "\n"))
	}
	dirSynced := false
	for _, l := range lines[renamed+1:] {
		if fsyncOf(l, dir) {
			dirSynced = true
		}
		isWrite := strings.Contains(l, "write") && strings.Contains(l, "<"+path+">")
		if isWrite && !dirSynced {
			t.Errorf("a commit was written to %s after the rename and before the folder's fsync: %s", path, l)
			break
		}
	}
	if !dirSynced {
		t.Errorf("the folder %s was not fsynced after the rename:\n%s", dir, strings.Join(lines[renamed:], "\n"))
	}
}

// Writers (fsynced and lazy) and readers go on while the store shrinks
// again and again: every acknowledged write is there after each shrink
// and after a reopen, and the newest value of a rewritten key wins.
func TestShrinkWithConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := Open(path, Options{Durable: true, ManualShrink: true})
	if err != nil {
		t.Fatal(err)
	}
	const writers = 3
	acked := make([]map[string]string, writers)
	var stop atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, writers+1)
	for w := range writers {
		acked[w] = map[string]string{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				k, last := fmt.Sprintf("w%d:%05d", w, i), fmt.Sprintf("last:%d", w)
				v := fmt.Sprint(i, strings.Repeat("v", 200))
				write := db.Update
				if i%2 == 1 {
					write = db.UpdateLazy
				}
				if err := write(func(tx *Tx) error {
					if err := tx.Set(k, v); err != nil {
						return err
					}
					return tx.Set(last, v)
				}); err != nil {
					errc <- err
					return
				}
				acked[w][k], acked[w][last] = v, v
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if _, err := db.List("w0:"); err != nil {
				errc <- err
				return
			}
			if _, err := db.Get("last:1"); err != nil && !errors.Is(err, ErrNotFound) {
				errc <- err
				return
			}
		}
	}()
	for range 20 {
		if err := db.Shrink(); err != nil {
			t.Error(err)
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		n := 0
		for w := range writers {
			for k, v := range acked[w] {
				if got, err := db.Get(k); err != nil || got != v {
					t.Fatalf("%s: Get(%s) = %.12q, %v; want %.12q", when, k, got, err, v)
				}
			}
			n += len(acked[w])
		}
		if kvs, _ := db.List(""); len(kvs) != n {
			t.Fatalf("%s: %d keys, %d acknowledged", when, len(kvs), n)
		}
	}
	check("after the shrinks")
	db = reopen(t, db, path)
	check("after a reopen")
}

// A shrink that finds no room for its copy fails with the reason, leaves
// the file byte for byte as it was and no copy behind, and the store goes
// on: reads at once, writes and shrinks once there is room again.
func TestShrinkOnAFullDiskLeavesTheStoreAsItWas(t *testing.T) {
	disk := testutil.SmallDisk(t, "2m")
	path := filepath.Join(disk.Dir, "s.db")
	db, err := Open(path, Options{Durable: true, ManualShrink: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	val := strings.Repeat("v", 10<<10)
	for i := range 40 {
		if err := db.Set(fmt.Sprintf("k%02d", i), val); err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	disk.Fill()
	if err := db.Shrink(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Shrink on a full disk = %v, want ENOSPC", err)
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("the file changed under a failed shrink (%d bytes, was %d): %v", len(after), len(before), err)
	}
	if _, err := os.Stat(shrinkPath(path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed shrink left its copy: %v", err)
	}
	if v, err := db.Get("k39"); err != nil || v != val {
		t.Fatalf("Get after a failed shrink: %.10q, %v", v, err)
	}
	disk.Free()
	if err := db.Set("after", "x"); err != nil {
		t.Fatal(err)
	}
	if err := db.Shrink(); err != nil {
		t.Fatalf("Shrink once there is room: %v", err)
	}
	db = reopen(t, db, path)
	if kvs, _ := db.List(""); len(kvs) != 41 {
		t.Fatalf("%d keys after reopen, want 41", len(kvs))
	}
}

// Without ManualShrink the store shrinks its file itself once it passed
// the minimum size and doubled (the rule is made small and quick here):
// 1 MiB of rewrites of one key ends below the minimum size.
func TestAutomaticShrink(t *testing.T) {
	every, minSize := autoShrinkEvery, autoShrinkMinSize
	autoShrinkEvery, autoShrinkMinSize = 10*time.Millisecond, 256<<10
	t.Cleanup(func() { autoShrinkEvery, autoShrinkMinSize = every, minSize })
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := Open(path, Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("v", 64<<10)
	for i := range 16 {
		if err := db.Set("k", fmt.Sprint(i, big)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := db.FileSize(); n > autoShrinkMinSize {
			return fmt.Errorf("file is %d bytes, not shrunk", n)
		}
		return nil
	})
	db = reopen(t, db, path)
	if v, err := db.Get("k"); err != nil || v != fmt.Sprint(15, big) {
		t.Fatalf("Get(k) after an automatic shrink and a reopen = %.10q, %v", v, err)
	}
}

// A copy left by a shrink that stopped before its rename is removed at
// Open; the file is what opens.
func TestOpenRemovesAStaleShrinkCopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := Open(path, Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set("k", "v"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := os.WriteFile(shrinkPath(path), []byte("*3\r\n$3\r\nset\r\n$1\r\nk\r\n$3\r\nold\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.Get("k"); err != nil || v != "v" {
		t.Fatalf("Get(k) = %q, %v", v, err)
	}
	if _, err := os.Stat(shrinkPath(path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale copy still there: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Shrink(); !errors.Is(err, buntdb.ErrDatabaseClosed) {
		t.Fatalf("Shrink after Close = %v", err)
	}
}
