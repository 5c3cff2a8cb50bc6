package agent

import (
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
