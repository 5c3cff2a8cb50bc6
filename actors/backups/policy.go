package backups

import (
	"time"

	"peerdns/internal/backup"
)

// policy is the retention and interval in force (BACKUP_RETENTION,
// BACKUP_INTERVAL), changed live by the settings actor's appliers.
type policy struct {
	keep  int           // backups kept
	every time.Duration // between automatic backups; 0: none
}

// due reports whether an automatic backup is due at now: they are on and
// no backup in list is dated less than the interval from now, before or
// after it. A backup dated further ahead (written while the clock was
// wrong) does not hold the next one back until the clock reaches it; one
// whose time does not parse counts as none.
func (p policy) due(now time.Time, list []backup.Info) bool {
	if p.every <= 0 {
		return false
	}
	for _, b := range list {
		t, err := time.Parse(time.RFC3339Nano, b.Timestamp)
		if err != nil {
			continue
		}
		if d := now.Sub(t); d < p.every && d > -p.every {
			return false
		}
	}
	return true
}
