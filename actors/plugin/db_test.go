package plugin

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
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
