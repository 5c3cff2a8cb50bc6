package backups

import (
	"time"

	"peerdns/internal/backup"
)

// The actor's messages live beside it: their replies carry
// internal/backup's types, which messages/ may not import. Every request
// gets its reply, errors in Err (internal/backup's sentinels wrapped:
// ErrBadName, ErrNotFound, ErrCorrupt, ErrForeign).

// Create writes a backup now. The reply is a *CreateReply.
type Create struct{}

// CreateReply holds the new backup's path.
type CreateReply struct {
	Path string
	Err  error
}

// List lists DATA/backups, newest first. The reply is a *ListReply.
type List struct{}

// ListReply holds the backups.
type ListReply struct {
	Backups []backup.Info
	Err     error
}

// Metadata reads one backup's metadata. The reply is a *MetadataReply.
type Metadata struct{ Name string }

// MetadataReply holds the metadata.
type MetadataReply struct {
	Meta backup.Meta
	Err  error
}

// Delete removes one backup. The reply is a *DeleteReply.
type Delete struct{ Name string }

// DeleteReply says whether it was removed.
type DeleteReply struct{ Err error }

// Restore checks and stages a backup; once the reply said it is sound
// the node swaps it in and restarts its parts (see the package doc).
// The reply is a *RestoreReply.
type Restore struct{ Name string }

// RestoreReply is nil Err once the backup was staged and checked.
type RestoreReply struct{ Err error }

// SetRetention sets how many backups are kept (BACKUP_RETENTION, at
// least 1). No reply.
type SetRetention struct{ Keep int }

// SetInterval sets the time between automatic backups
// (BACKUP_INTERVAL; 0 turns them off). No reply.
type SetInterval struct{ Every time.Duration }

// Tick is the clock: at Now the actor starts an automatic backup when
// one is due and none is running. The actor's own ticker sends it every
// Deps.Check; asked (tests drive the clock so), it answers a
// *TickReply.
type Tick struct{ Now time.Time }

// TickReply says whether the tick started an automatic backup.
type TickReply struct{ Started bool }
