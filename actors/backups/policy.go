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
// the newest backup in list (newest first, as backup.List gives) is at
// least the interval old, or there is none, or its time does not parse.
func (p policy) due(now time.Time, list []backup.Info) bool {
	if p.every <= 0 {
		return false
	}
	if len(list) == 0 {
		return true
	}
	last, err := time.Parse(time.RFC3339Nano, list[0].Timestamp)
	return err != nil || now.Sub(last) >= p.every
}
