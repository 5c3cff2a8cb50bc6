package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"peerdns/internal/testutil"
)

// On a disk that fills up a commit fails with ENOSPC and leaves nothing
// behind (buntdb rolls it back and truncates what it wrote), reads go
// on, Health says why, and once space is back writes go on; every
// acknowledged write is there after a reopen.
func TestDiskFull(t *testing.T) {
	disk := testutil.SmallDisk(t, "1m")
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			path := filepath.Join(disk.Dir, fmt.Sprintf("s%v.db", durable))
			db, err := Open(path, Options{Durable: durable})
			if err != nil {
				t.Fatal(err)
			}
			acked := map[string]bool{}
			for i := 0; i < 50; i++ {
				k := fmt.Sprintf("a%03d", i)
				if err := db.Set(k, strings.Repeat("v", 100)); err != nil {
					t.Fatal(err)
				}
				acked[k] = true
			}
			disk.Fill()
			var failed error
			for i := 0; i < 200 && failed == nil; i++ {
				k := fmt.Sprintf("b%03d", i)
				if err := db.Set(k, strings.Repeat("v", 1000)); err != nil {
					failed = err
				} else {
					acked[k] = true
				}
			}
			if !errors.Is(failed, syscall.ENOSPC) {
				t.Fatalf("writes on a full disk: %v, want ENOSPC", failed)
			}
			if err := db.Health(); err == nil || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Health on a full disk: %v", err)
			}
			if v, err := db.Get("a000"); err != nil || len(v) != 100 {
				t.Fatalf("read on a full disk: %q, %v", v, err)
			}
			disk.Free()
			if err := db.Set("after", "x"); err != nil {
				t.Fatalf("write once space is back: %v", err)
			}
			acked["after"] = true
			if err := db.Health(); err != nil {
				t.Fatalf("Health once space is back: %v", err)
			}
			db.Close()
			db, err = Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			kvs, _ := db.List("")
			if len(kvs) != len(acked) {
				t.Fatalf("%d keys after reopen, %d acknowledged", len(kvs), len(acked))
			}
			for _, kv := range kvs {
				if !acked[kv.Key] {
					t.Fatalf("key %s was not acknowledged", kv.Key)
				}
			}
		})
	}
}
