// Package storetest opens agent stores for tests of the packages that
// read or fill one (collect, health, api).
package storetest

import (
	"errors"
	"testing"

	"peerdns/agent/store"
)

// New opens a store with cfg (a zero Config is memory only, default
// retention) and closes it when the test ends.
func New(t testing.TB, cfg store.Config) *store.DB {
	t.Helper()
	db, err := store.Open(cfg)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("close store: %v", err)
		}
	})
	return db
}
