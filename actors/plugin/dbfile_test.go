package plugin

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// One 1 MiB key rewritten in a loop: the file on disk stays within
// maxFileSize of the data, however fast the writes come, and the newest
// value is what a reopen reads.
func TestDBFileStaysBoundedUnderRewrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.db")
	db, err := openDB(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer db.close()
	big := strings.Repeat("v", maxValue-20)
	bound := maxFileSize(maxValue + KeyOverhead + 1)
	var peak int64
	for i := range 100 {
		value, _ := json.Marshal(fmt.Sprint(i, big))
		if _, err := db.call("db.put", json.RawMessage(fmt.Sprintf(`{"key":"k","value":%s}`, value))); err != nil {
			t.Fatal(err)
		}
		peak = max(peak, db.db.FileSize())
		if peak > bound {
			t.Fatalf("after %d rewrites of a %d-byte value the file is %d bytes, over the bound %d", i+1, len(value), peak, bound)
		}
	}
	t.Logf("peak file size %d (bound %d)", peak, bound)
	if err := db.close(); err != nil {
		t.Fatal(err)
	}
	db, err = openDB(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer db.close()
	res, err := db.call("db.get", json.RawMessage(`{"key":"k"}`))
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := json.Unmarshal(res.(map[string]any)["value"].(json.RawMessage), &got); err != nil || got != fmt.Sprint(99, big) {
		t.Fatalf("db.get after reopen = %.12q, %v; want the last write", got, err)
	}
}
