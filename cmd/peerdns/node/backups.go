package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"peerdns/actors/backups"
	"peerdns/actors/settings"
	"peerdns/messages"
)

// Backups are the backups actor's (actors/backups: DATA/backups, the
// interval, retention, staging a restore). The root spawns it with the
// owners of the data it copies and keeps one part of a restore: the
// in-place restart, because that stops every actor of the node (the
// backups actor too) and starts them again, which only the owner of the
// process can do.
//
// restoreInPlace gets a staged, checked backup after the request was
// answered and the current state backed up. It publishes system-reset
// to the WebSocket clients, stops every part but the data folder lock
// and the admin socket (requests meanwhile get 503 with Retry-After,
// http/httpx.Handoff), moves the current state files aside, moves the staged
// ones in and starts again. If that start fails, the previous files go
// back and the node starts on them; if even that fails, the node reports
// a fatal error (Fatal). The state that failed to start is kept in
// DATA/.failed-restore-<time> for a look.

// startBackups spawns the backups actor after the plugins supervisor (it
// asks it for the plugin databases); it stops before it.
func (n *Node) startBackups(inForce map[string]string) error {
	keep, _ := strconv.Atoi(inForce[settings.BackupRetention]) // below 1: the default
	hours, _ := strconv.Atoi(inForce[settings.BackupInterval])
	pid, err := n.root.Spawn("backups", backups.Props(backups.Deps{
		Data: n.orig.Data, NodeID: n.id.ID(), Version: n.orig.Version,
		Ledger: n.ledgerDB, Node: n.nodeDB, Plugins: n.plugins,
		Keep: keep, Every: time.Duration(hours) * time.Hour,
		Restore: func(s backups.Staged) { go n.restoreInPlace(s) }, Log: n.logs["core"],
	}))
	if err != nil {
		return fmt.Errorf("spawn backups: %w", err)
	}
	n.backups = pid
	n.closers = append(n.closers, func() { _ = n.root.System.Root.StopFuture(pid).Wait() })
	return nil
}

// setBackupRetention and setBackupInterval are the live appliers of
// BACKUP_RETENTION and BACKUP_INTERVAL: the actor owns the policy.
func (n *Node) setBackupRetention(keep int) {
	n.root.System.Root.Send(n.backups, &backups.SetRetention{Keep: keep})
}

func (n *Node) setBackupInterval(hours int) {
	n.root.System.Root.Send(n.backups, &backups.SetInterval{Every: time.Duration(hours) * time.Hour})
}

// backupClient is the actor's side of the admin backup routes.
func (n *Node) backupClient() backups.Client {
	return backups.Client{Root: n.root.System.Root, PID: n.backups}
}

// restoreInPlace swaps a staged backup in and restarts (see above).
func (n *Node) restoreInPlace(s backups.Staged) {
	defer os.RemoveAll(s.Dir)
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if n.stopped {
		return
	}
	n.root.System.EventStream.Publish(&messages.Hint{Type: messages.HintSystemReset})
	n.stopParts()
	aside := filepath.Join(n.orig.Data, ".pre-restore-"+time.Now().UTC().Format("20060102T150405"))
	err := backups.Swap(n.orig.Data, s.Dir, aside)
	if err != nil {
		// Nothing moved (Swap undid its moves): start on the current
		// state.
		os.RemoveAll(aside)
		if serr := n.start(); serr != nil {
			n.fail(fmt.Errorf("restore of %s failed (%v) and the node cannot start again: %v", s.Name, err, serr))
			return
		}
		n.logs["core"].Error("backup restore failed; nothing changed", "backup", s.Name, "err", err)
		return
	}
	if err = n.start(); err == nil {
		os.RemoveAll(aside)
		n.logs["core"].Info("backup restored", "backup", s.Name)
		return
	}
	n.stopParts()
	// Put the previous state back and start on it.
	if rerr := backups.Swap(n.orig.Data, aside, filepath.Join(n.orig.Data, ".failed-restore-"+time.Now().UTC().Format("20060102T150405"))); rerr != nil {
		n.fail(fmt.Errorf("restore of %s failed (%v) and the previous state could not be put back: %v; it is in %s", s.Name, err, rerr, aside))
		return
	}
	if serr := n.start(); serr != nil {
		n.fail(fmt.Errorf("restore of %s failed (%v) and the node cannot start on its previous state: %v", s.Name, err, serr))
		return
	}
	os.RemoveAll(aside)
	n.logs["core"].Error("backup restore failed; the previous state is back", "backup", s.Name, "err", err)
}
