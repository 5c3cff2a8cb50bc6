package node

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"peerdns/actors/plugin"
	"peerdns/actors/settings"
	"peerdns/internal/backup"
)

// Backups (internal/backup) of this node's state, in DATA/backups:
// created on request and, with BACKUP_INTERVAL > 0, every that many hours
// (checked each minute against the newest backup); BACKUP_RETENTION of
// them are kept. Restoring is restore.go.

// backupPolicy is the live retention and interval (the settings actor
// changes them).
type backupPolicy struct {
	keep  atomic.Int64 // backups kept
	every atomic.Int64 // time.Duration between automatic backups; 0: none
}

func (n *Node) backupDir() string { return filepath.Join(n.orig.Data, "backups") }

// backupSources are what a backup holds; pluginData is the plugins
// supervisor's consistent copy of DATA/plugin-data (snapshotPlugins).
func (n *Node) backupSources(pluginData string) []backup.Source {
	return []backup.Source{
		{Name: "ledger.db", Write: func(w io.Writer) error { return n.ledgerDB.Snapshot(w) }},
		{Name: "node.db", Write: func(w io.Writer) error { return n.nodeDB.Snapshot(w) }},
		{Name: "identity.key", Path: filepath.Join(n.orig.Data, "identity.key")},
		{Name: "ca", Path: filepath.Join(n.orig.Data, "ca")},
		{Name: "plugins", Path: filepath.Join(n.orig.Data, "plugins")},
		{Name: "plugin-data", Path: pluginData},
	}
}

// snapshotPlugins has the plugins supervisor, which owns the plugin
// databases, write a consistent copy of them into a temporary folder
// (store snapshots, as the ledger's; see plugin.SnapshotDatabases); the
// caller removes the folder.
func (n *Node) snapshotPlugins() (string, error) {
	dir, err := os.MkdirTemp("", "peerdns-plugin-data-*")
	if err != nil {
		return "", err
	}
	res, err := n.root.System.Root.RequestFuture(n.plugins, &plugin.SnapshotDatabases{Dir: dir}, 5*time.Minute).Result()
	if err == nil {
		if r := res.(*plugin.SnapshotDatabasesReply); r.Err != nil {
			err = r.Err
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("plugin databases: %w", err)
	}
	return dir, nil
}

// CreateBackup writes a backup now and returns its path.
func (n *Node) CreateBackup() (string, error) {
	pluginData, err := n.snapshotPlugins()
	if err != nil {
		n.logs["core"].Error("backup failed", "err", err)
		return "", err
	}
	defer os.RemoveAll(pluginData)
	path, err := backup.Create(n.backupDir(), int(n.backups.keep.Load()), n.id.ID(), n.orig.Version, time.Now(), n.backupSources(pluginData))
	if err != nil {
		n.logs["core"].Error("backup failed", "err", err)
		return "", err
	}
	n.logs["core"].Info("backup written", "path", path)
	return path, nil
}

// ListBackups lists DATA/backups, newest first.
func (n *Node) ListBackups() ([]backup.Info, error) { return backup.List(n.backupDir()) }

// BackupMetadata reads one backup's metadata.
func (n *Node) BackupMetadata(name string) (backup.Meta, error) {
	return backup.Metadata(n.backupDir(), name)
}

// DeleteBackup removes one backup.
func (n *Node) DeleteBackup(name string) error {
	if err := backup.Delete(n.backupDir(), name); err != nil {
		return err
	}
	n.logs["core"].Info("backup deleted", "name", name)
	return nil
}

// setBackupPolicy reads the two settings' values in force.
func (n *Node) setBackupPolicy(inForce map[string]string) {
	keep, err := strconv.Atoi(inForce[settings.BackupRetention])
	if err != nil || keep < 1 {
		keep = 10
	}
	n.backups.keep.Store(int64(keep))
	hours, _ := strconv.Atoi(inForce[settings.BackupInterval])
	n.backups.every.Store(int64(time.Duration(hours) * time.Hour))
}

// startBackupTimer writes automatic backups while the node runs.
func (n *Node) startBackupTimer() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if n.backupDue(now) {
					_, _ = n.CreateBackup() // logged
				}
			}
		}
	}()
	n.closers = append(n.closers, func() { cancel(); <-done })
}

// backupDue: automatic backups are on and the newest backup is at least
// the interval old (or there is none).
func (n *Node) backupDue(now time.Time) bool {
	every := time.Duration(n.backups.every.Load())
	if every <= 0 {
		return false
	}
	list, err := n.ListBackups()
	if err != nil {
		return false
	}
	if len(list) == 0 {
		return true
	}
	last, err := time.Parse(time.RFC3339Nano, list[0].Timestamp)
	return err != nil || now.Sub(last) >= every
}
