package node

import "testing"

// BACKUP_RETENTION changed through the API applies at once: the backups
// actor keeps that many from the next backup on.
func TestBackupRetentionLive(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	backups := func() int {
		t.Helper()
		var list []struct{ Name string }
		mustJSON(t, "GET", base+"/api/backups", "", 200, &list)
		return len(list)
	}
	mustJSON(t, "POST", base+"/api/update-settings", `{"settings":{"BACKUP_RETENTION":"1"}}`, 200, nil)
	for i := 0; i < 2; i++ {
		mustJSON(t, "POST", base+"/api/backups/create", "", 200, nil)
	}
	if got := backups(); got != 1 {
		t.Fatalf("with BACKUP_RETENTION 1: %d backups, want 1", got)
	}
	mustJSON(t, "POST", base+"/api/update-settings", `{"settings":{"BACKUP_RETENTION":"3"}}`, 200, nil)
	for i := 0; i < 3; i++ {
		mustJSON(t, "POST", base+"/api/backups/create", "", 200, nil)
	}
	if got := backups(); got != 3 {
		t.Fatalf("with BACKUP_RETENTION 3: %d backups, want 3", got)
	}
}
