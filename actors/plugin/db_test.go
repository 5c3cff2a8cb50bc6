package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// A db.list answer is bounded: over MaxListBytes it is an error that
// says to page, and limit and after page through every key.
func TestDBListIsBounded(t *testing.T) {
	db, err := openDB(filepath.Join(t.TempDir(), "data.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer db.close()
	value, _ := json.Marshal(strings.Repeat("v", maxValue-10))
	n := MaxListBytes/len(value) + 2
	for i := range n {
		if _, err := db.call("db.put", json.RawMessage(fmt.Sprintf(`{"key":"k/%02d","value":%s}`, i, value))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.call("db.put", json.RawMessage(`{"key":"other","value":1}`)); err != nil {
		t.Fatal(err)
	}
	if res, err := db.call("db.list", json.RawMessage(`{"prefix":"k/"}`)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("list of %d MiB: %d items, %v", n, len(res.([]dbItem)), err)
	}
	var keys []string
	after := ""
	for {
		res, err := db.call("db.list", json.RawMessage(fmt.Sprintf(`{"prefix":"k/","limit":2,"after":%q}`, after)))
		if err != nil {
			t.Fatal(err)
		}
		items := res.([]dbItem)
		if len(items) == 0 {
			break
		}
		for _, it := range items {
			keys = append(keys, it.Key)
		}
		after = items[len(items)-1].Key
	}
	if len(keys) != n || keys[0] != "k/00" || keys[n-1] != fmt.Sprintf("k/%02d", n-1) {
		t.Fatalf("paged keys: %v", keys)
	}
	if res, err := db.call("db.list", json.RawMessage(`{"prefix":"o"}`)); err != nil || len(res.([]dbItem)) != 1 {
		t.Fatalf("small list: %v %v", res, err)
	}
}

// The quota holds for many small entries (each key counts KeyOverhead
// more than its bytes), after deletes, and across a reopen.
func TestDBQuotaCountsKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.db")
	db, err := openDB(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	const quota = 1 << 20
	db.quota = quota
	n := 0
	for ; n < quota; n++ { // one byte of value: without the charge, ~150,000 fit
		if _, err := db.call("db.put", json.RawMessage(fmt.Sprintf(`{"key":"%d","value":1}`, n))); err != nil {
			if !strings.Contains(err.Error(), "database full") {
				t.Fatal(err)
			}
			break
		}
	}
	if max := quota / KeyOverhead; n > max || n < max/2 {
		t.Fatalf("%d one-byte entries fit in %d bytes, want at most %d", n, quota, max)
	}
	// An overwrite of the same size, and a put after a delete, fit.
	if _, err := db.call("db.put", json.RawMessage(`{"key":"0","value":2}`)); err != nil {
		t.Fatalf("overwrite: %v", err)
	}
	if _, err := db.call("db.delete", json.RawMessage(`{"key":"1"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.call("db.put", json.RawMessage(`{"key":"new","value":1}`)); err != nil {
		t.Fatalf("put after a delete: %v", err)
	}
	used := db.used
	if err := db.close(); err != nil {
		t.Fatal(err)
	}
	if db, err = openDB(path, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	defer db.close()
	db.quota = quota
	if db.used != used {
		t.Fatalf("used %d after a reopen, %d before", db.used, used)
	}
	if _, err := db.call("db.put", json.RawMessage(`{"key":"more","value":1}`)); err == nil || !strings.Contains(err.Error(), "database full") {
		t.Fatalf("a put past the quota after a reopen: %v", err)
	}
	for _, bad := range []string{`{"key":"","value":1}`, `{"key":"` + strings.Repeat("k", maxKey+1) + `","value":1}`, `{"key":"k","value":}`} {
		if _, err := db.call("db.put", json.RawMessage(bad)); err == nil {
			t.Errorf("put %.40s: no error", bad)
		}
	}
}

// dbSizes puts a value of '<' under a key of control bytes (each sent
// as \u0001), then logs on stderr the length of the db.get and db.list
// answers as they come.
const dbSizes = `read line
printf '{"jsonrpc":"2.0","id":1,"result":{}}\n'
v=$(head -c 1000000 /dev/zero | tr '\0' '<')
k=$(awk 'BEGIN { for (i = 0; i < 1024; i++) printf "\\u0001" }')
printf '{"jsonrpc":"2.0","id":"p","method":"db.put","params":{"key":"%s","value":"%s"}}\n' "$k" "$v"
head -n 1 >/dev/null
printf '{"jsonrpc":"2.0","id":"g","method":"db.get","params":{"key":"%s"}}\n' "$k"
g=$(head -n 1 | wc -c)
printf '{"jsonrpc":"2.0","id":"l","method":"db.list","params":{}}\n'
l=$(head -n 1 | wc -c)
echo "sizes $g $l" >&2
exec sleep 600
`

// What the node sends a handler for db.get and db.list is about the
// size of the data: a value of '<' is not sent six times as long (HTML
// escaping), so MaxListBytes bounds what one db.list sends.
func TestDBAnswersAreTheDataSize(t *testing.T) {
	dir := t.TempDir()
	writeShellPlugin(t, dir, "sizes", "sizes.p2p", dbSizes)
	h := newHarness(t, dir, nil)
	var got, list int
	testutil.Eventually(t, 20*time.Second, func() error {
		_, rest, ok := strings.Cut(h.log.String(), "sizes ")
		if !ok {
			return errors.New("no sizes logged yet")
		}
		_, err := fmt.Sscan(rest, &got, &list)
		return err
	})
	if max := 1000000 + 100; got > max {
		t.Fatalf("db.get of a 1000000-byte value sent %d bytes", got)
	}
	if max := 1000000 + 6*maxKey + 100; list > max {
		t.Fatalf("db.list of one 1000000-byte value sent %d bytes", list)
	}
}

// A db.list page costs the node about the page, not the keys it skips:
// a handler paging through a large database with small limits, up to
// maxInflight calls at once, does not make the node copy the list of
// every key for each.
func TestDBListCopiesOnlyItsPage(t *testing.T) {
	db, err := openDB(filepath.Join(t.TempDir(), "data.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer db.close()
	const n = 10000
	for i := range n {
		if _, err := db.call("db.put", json.RawMessage(fmt.Sprintf(`{"key":"k/%05d","value":1}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const calls = 10
	for range calls {
		res, err := db.call("db.list", json.RawMessage(`{"prefix":"k/","after":"k/04999","limit":2}`))
		if err != nil {
			t.Fatal(err)
		}
		if items := res.([]dbItem); len(items) != 2 || items[0].Key != "k/05000" || items[1].Key != "k/05001" {
			t.Fatalf("page: %v", items)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / calls; per > 32<<10 {
		t.Fatalf("a db.list page of 2 keys of %d allocated %d bytes", n, per)
	}
}

// db.list counts a key as it is sent: a key of control bytes (six
// bytes each in JSON) cannot make an answer six times MaxListBytes.
func TestDBListCountsKeysAsSent(t *testing.T) {
	db, err := openDB(filepath.Join(t.TempDir(), "data.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer db.close()
	ctl := strings.Repeat(`\u0001`, maxKey-8)
	for i := range MaxListBytes / maxKey * 7 / 8 {
		if _, err := db.call("db.put", json.RawMessage(fmt.Sprintf(`{"key":"%s%08d","value":1}`, ctl, i))); err != nil {
			t.Fatal(err)
		}
	}
	res, err := db.call("db.list", nil)
	if err != nil {
		if !strings.Contains(err.Error(), "limit") {
			t.Fatal(err)
		}
		return
	}
	b, err := marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxListBytes+64<<10 {
		t.Fatalf("a db.list answer of %d bytes", len(b))
	}
}
