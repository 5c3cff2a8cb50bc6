package node

import (
	"fmt"
	"strconv"
	"time"

	"peerdns/actors/backups"
	"peerdns/actors/settings"
)

// Backups are the backups actor's (actors/backups: DATA/backups, the
// interval, retention, staging and swapping in a restore). The root
// spawns it with the owners of the data it copies and hands it the one
// step of a restore only the owner of the process can do: stopping
// every part of the node (the backups actor too) and starting them
// again (restarter, the actor's backups.Restarter).

// startBackups spawns the backups actor after the plugins supervisor (it
// asks it for the plugin databases); it stops before it.
func (n *Node) startBackups(inForce map[string]string) error {
	keep, _ := strconv.Atoi(inForce[settings.BackupRetention]) // below 1: the default
	hours, _ := strconv.Atoi(inForce[settings.BackupInterval])
	pid, err := n.root.Spawn("backups", backups.Props(backups.Deps{
		Data: n.orig.Data, NodeID: n.id.ID(), Version: n.orig.Version,
		Ledger: n.ledgerDB, Node: n.nodeDB, Plugins: n.plugins,
		Keep: keep, Every: time.Duration(hours) * time.Hour,
		Restart: restarter{n}, Log: n.logs["core"],
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

// restarter is the node's side of an in-place restore: the data folder
// lock and the admin socket stay (requests meanwhile get 503 with
// Retry-After, http/httpx.Handoff), everything else stops and starts.
type restarter struct{ n *Node }

func (r restarter) Hold(f func()) bool {
	r.n.lifeMu.Lock()
	defer r.n.lifeMu.Unlock()
	if r.n.stopped {
		return false
	}
	f()
	return true
}

func (r restarter) StopParts()        { r.n.stopParts() }
func (r restarter) StartParts() error { return r.n.start() }
func (r restarter) Fatal(err error)   { r.n.fail(err) }
