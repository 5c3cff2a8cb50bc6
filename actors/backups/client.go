package backups

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/ask"
	"peerdns/internal/backup"
)

// ErrBusy reports that the backups actor did not answer in time.
var ErrBusy = errors.New("the backups actor did not answer in time")

// Client asks the actor on behalf of the admin routes: it implements the
// interface http/admin declares for them (admin.Backups).
type Client struct {
	Root *actor.RootContext
	PID  *actor.PID
	// Timeout bounds list, metadata and delete [30s]; JobTimeout create
	// and restore [1h].
	Timeout, JobTimeout time.Duration
}

// CreateBackup writes a backup now and returns its path.
func (c Client) CreateBackup() (string, error) {
	r, err := askActor[*CreateReply](c, &Create{}, c.jobTimeout())
	if err != nil {
		return "", err
	}
	return r.Path, r.Err
}

// ListBackups lists DATA/backups, newest first.
func (c Client) ListBackups() ([]backup.Info, error) {
	r, err := askActor[*ListReply](c, &List{}, c.timeout())
	if err != nil {
		return nil, err
	}
	return r.Backups, r.Err
}

// BackupMetadata reads one backup's metadata.
func (c Client) BackupMetadata(name string) (backup.Meta, error) {
	r, err := askActor[*MetadataReply](c, &Metadata{Name: name}, c.timeout())
	if err != nil {
		return backup.Meta{}, err
	}
	return r.Meta, r.Err
}

// DeleteBackup removes one backup.
func (c Client) DeleteBackup(name string) error {
	r, err := askActor[*DeleteReply](c, &Delete{Name: name}, c.timeout())
	if err != nil {
		return err
	}
	return r.Err
}

// RestoreBackup checks and stages the backup and backs up the current
// state; when both went well the node restores it after this returns.
func (c Client) RestoreBackup(name string) error {
	r, err := askActor[*RestoreReply](c, &Restore{Name: name}, c.jobTimeout())
	if err != nil {
		return err
	}
	return r.Err
}

func (c Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return 30 * time.Second
}

func (c Client) jobTimeout() time.Duration {
	if c.JobTimeout > 0 {
		return c.JobTimeout
	}
	return time.Hour
}

// askActor is internal/ask's Reply (the helper http/ uses too) with this
// actor's own busy error, whose text the admin routes show.
func askActor[R any](c Client, req any, d time.Duration) (R, error) {
	r, err := ask.Reply[R](c.Root, c.PID, req, d)
	if errors.Is(err, ask.ErrBusy) {
		return r, ErrBusy
	}
	return r, err
}
