package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"peerdns/agent/store"
)

// TestRetentionSurvivesRestart: what retention.set applied is saved and
// used when the agent opens its store again; a Config value still wins.
func TestRetentionSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(store.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetRetention(2*time.Hour, 3*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := saveRetention(dir, db); err != nil {
		t.Fatal(err)
	}
	db.Close()
	t0, t1, err := savedRetention(Config{Dir: dir})
	if err != nil || t0 != 2*time.Hour || t1 != 3*24*time.Hour {
		t.Fatalf("savedRetention = %v %v %v, want 2h 72h", t0, t1, err)
	}
	t0, _, _ = savedRetention(Config{Dir: dir, Tier0Retention: time.Minute})
	if t0 != time.Minute {
		t.Errorf("Config tier 0 %v, want 1m to win", t0)
	}
}

// A retention.json whose values the store refuses (past its bounds, or
// past what a duration holds) stops the start naming the file and what to
// do, not with the store's bare message.
func TestSavedRetentionOutOfRangeNamesTheFile(t *testing.T) {
	for _, doc := range []string{`{"tier0_seconds":172800}`, `{"tier1_seconds":9300000000000}`} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, RetentionFile), []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := savedRetention(Config{Dir: dir})
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, RetentionFile)) || !strings.Contains(err.Error(), "at most") {
			t.Errorf("%s: %v, want an error naming %s and the bound", doc, err, RetentionFile)
		}
	}
}
