package backups

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/plugin"
	"peerdns/internal/backup"
)

// Snapshotter writes a consistent copy of a store (store.DB does).
type Snapshotter interface {
	Snapshot(w io.Writer) error
}

// Deps is what the actor needs from the node.
type Deps struct {
	Data    string      // the data folder: backups/, identity.key, ca/, plugins/
	NodeID  string      // this node's peer id (metadata; foreign backups are refused)
	Version string      // the binary's version (metadata)
	Ledger  Snapshotter // ledger.db
	Node    Snapshotter // node.db
	Plugins *actor.PID  // the plugins supervisor, owner of DATA/plugin-data; required
	// Keep is BACKUP_RETENTION (below 1: 10); Every is BACKUP_INTERVAL
	// (0: no automatic backups). SetRetention and SetInterval change them.
	Keep  int
	Every time.Duration
	// Check is how often the actor looks whether an automatic backup is
	// due [1m]; negative: never (tests send Tick themselves).
	Check time.Duration
	// Restart is the process owner's side of a restore (stopping every
	// part of the node and starting them again; see Restarter). Nil:
	// restores are refused.
	Restart Restarter
	Log     *slog.Logger // the core channel
	// PluginTimeout bounds the plugins supervisor's snapshot [5m].
	PluginTimeout time.Duration
}

// Props makes the actor.
func Props(d Deps) *actor.Props {
	if d.Keep < 1 {
		d.Keep = 10
	}
	if d.Check == 0 {
		d.Check = time.Minute
	}
	if d.PluginTimeout <= 0 {
		d.PluginTimeout = 5 * time.Minute
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	// The policy outlives a restart of the actor (a crash): the live
	// changes the settings actor sent stay in force.
	p := &policy{keep: d.Keep, every: d.Every}
	return actor.PropsFromProducer(func() actor.Actor { return &Actor{d: d, p: p} })
}

// Actor owns DATA/backups (see the package doc).
type Actor struct {
	d        Deps
	sys      *actor.ActorSystem
	p        *policy
	autoBusy bool           // an automatic backup is running
	jobs     sync.WaitGroup // creates and restores in flight
	stop     chan struct{}  // ends the ticker
	// restoring: a restore was asked and has not failed; the restart
	// that swaps it in stops this actor, and the one spawned after it
	// takes restores again.
	restoring bool
}

// autoDone tells the actor its automatic backup ended.
type autoDone struct{}

// restoreFailed tells the actor its restore ended without a swap.
type restoreFailed struct{}

// errRestoring refuses a restore asked while another one runs: the
// second would be swapped in over the first, after the restart of the
// first (its system-reset hint on the actor system that restart shut
// down, so no client connected after it would hear it).
var errRestoring = errors.New("a restore is already under way")

func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.sys = c.ActorSystem()
		if a.d.Check > 0 {
			a.stop = make(chan struct{})
			go ticks(c.ActorSystem().Root, c.Self(), a.d.Check, a.stop)
		}
	case *actor.Restarting:
		a.stopTicks()
	case *actor.Stopping:
		a.stopTicks()
		a.jobs.Wait()
	case *SetRetention:
		if m.Keep >= 1 {
			a.p.keep = m.Keep
		}
	case *SetInterval:
		a.p.every = max(m.Every, 0)
	case *Tick:
		started := a.tick(c, m.Now)
		if c.Sender() != nil {
			c.Respond(&TickReply{Started: started})
		}
	case autoDone:
		a.autoBusy = false
	case restoreFailed:
		a.restoring = false
	case *Create:
		a.job(c, func(keep int) any {
			path, err := a.create(keep)
			return &CreateReply{Path: path, Err: err}
		})
	case *Restore:
		a.restore(c, m.Name)
	case *List:
		list, err := backup.List(a.dir())
		c.Respond(&ListReply{Backups: list, Err: err})
	case *Metadata:
		meta, err := backup.Metadata(a.dir(), m.Name)
		c.Respond(&MetadataReply{Meta: meta, Err: err})
	case *Delete:
		err := backup.Delete(a.dir(), m.Name)
		if err == nil {
			a.d.Log.Info("backup deleted", "name", m.Name)
		}
		c.Respond(&DeleteReply{Err: err})
	}
}

func (a *Actor) stopTicks() {
	if a.stop != nil {
		close(a.stop)
		a.stop = nil
	}
}

func (a *Actor) dir() string { return filepath.Join(a.d.Data, "backups") }

// job runs work beside the actor with the retention in force now and
// sends its reply to the requester, if there is one.
func (a *Actor) job(c actor.Context, work func(keep int) any) {
	sys, sender, keep := c.ActorSystem(), c.Sender(), a.p.keep
	root := sys.Root
	a.jobs.Add(1)
	go func() {
		defer a.jobs.Done()
		reply := work(keep)
		if sender != nil {
			root.Send(sender, reply)
		}
	}()
}

// tick starts an automatic backup when one is due and none is running.
func (a *Actor) tick(c actor.Context, now time.Time) bool {
	if a.autoBusy || a.p.every <= 0 {
		return false
	}
	list, err := backup.List(a.dir())
	if err != nil || !a.p.due(now, list) {
		return false
	}
	a.autoBusy = true
	root, self, keep := c.ActorSystem().Root, c.Self(), a.p.keep
	a.jobs.Add(1)
	go func() {
		defer a.jobs.Done()
		_, _ = a.create(keep) // logged
		root.Send(self, autoDone{})
	}()
	return true
}

// ticks sends a Tick every interval until stop closes.
func ticks(root *actor.RootContext, self *actor.PID, every time.Duration, stop chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			root.Send(self, &Tick{Now: now})
		}
	}
}

// create writes a backup now, keeping at most keep, and returns its
// path. It runs in a job, never in Receive.
func (a *Actor) create(keep int) (string, error) {
	pluginData, err := a.snapshotPlugins()
	if err != nil {
		a.d.Log.Error("backup failed", "err", err)
		return "", err
	}
	defer os.RemoveAll(pluginData)
	path, err := backup.Create(a.dir(), keep, a.d.NodeID, a.d.Version, time.Now(), a.sources(pluginData))
	if err != nil {
		a.d.Log.Error("backup failed", "err", err)
		return "", err
	}
	a.d.Log.Info("backup written", "path", path)
	return path, nil
}

// sources are what a backup holds; pluginData is the plugins
// supervisor's consistent copy of DATA/plugin-data.
func (a *Actor) sources(pluginData string) []backup.Source {
	data := a.d.Data
	return []backup.Source{
		{Name: "ledger.db", Write: a.d.Ledger.Snapshot},
		{Name: "node.db", Write: a.d.Node.Snapshot},
		{Name: "identity.key", Path: filepath.Join(data, "identity.key")},
		{Name: "ca", Path: filepath.Join(data, "ca")},
		{Name: "plugins", Path: filepath.Join(data, "plugins")},
		{Name: "plugin-data", Path: pluginData},
	}
}

// snapshotPlugins has the plugins supervisor, which owns the plugin
// databases, write a consistent copy of them into a temporary folder
// in DATA/backups (backup.PartialPrefix: what a killed process left
// there RemoveStaging removes); the caller removes the folder.
func (a *Actor) snapshotPlugins() (string, error) {
	if err := os.MkdirAll(a.dir(), 0o700); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(a.dir(), backup.PartialPrefix+"plugin-data-*")
	if err != nil {
		return "", err
	}
	res, err := a.root().RequestFuture(a.d.Plugins, &plugin.SnapshotDatabases{Dir: dir}, a.d.PluginTimeout).Result()
	if err == nil {
		r, ok := res.(*plugin.SnapshotDatabasesReply)
		switch {
		case !ok:
			err = fmt.Errorf("unexpected reply %T", res)
		case r.Err != nil:
			err = r.Err
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("plugin databases: %w", err)
	}
	return dir, nil
}

// root is the actor system's root context (jobs ask and answer with it).
func (a *Actor) root() *actor.RootContext { return a.sys.Root }

// restore stages the backup called name in a job; once it is sound and
// the current state is backed up the requester gets its answer and the
// staged folder is swapped in (restoreInPlace). A failed backup of the
// current state is the request's error.
func (a *Actor) restore(c actor.Context, name string) {
	if a.d.Restart == nil {
		c.Respond(&RestoreReply{Err: fmt.Errorf("this node cannot restore backups")})
		return
	}
	if a.restoring {
		c.Respond(&RestoreReply{Err: errRestoring})
		return
	}
	a.restoring = true
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	staged := filepath.Join(a.d.Data, ".restore-"+hex.EncodeToString(rnd[:]))
	sys, sender, self, keep := c.ActorSystem(), c.Sender(), c.Self(), a.p.keep
	root := sys.Root
	a.jobs.Add(1)
	go func() {
		defer a.jobs.Done()
		_, err := backup.Stage(a.dir(), name, staged, a.d.NodeID, a.verify)
		if err != nil {
			a.d.Log.Warn("backup restore refused", "backup", name, "err", err)
		} else if _, cerr := a.create(keep); cerr != nil {
			// Before the answer: a restore that will not happen must
			// not be answered as one that does.
			os.RemoveAll(staged)
			err = fmt.Errorf("restore cancelled: cannot back up the current state first: %w", cerr)
			a.d.Log.Error("restore cancelled: cannot back up the current state first", "backup", name, "err", cerr)
		} else {
			a.d.Log.Info("restoring backup", "backup", name)
		}
		if err != nil {
			// Before the answer: a restore asked once this one was
			// answered reaches the mailbox after it, and is taken.
			root.Send(self, restoreFailed{})
		}
		if sender != nil {
			root.Send(sender, &RestoreReply{Err: err})
		}
		if err != nil {
			return
		}
		// Not inside the job: the restart stops this actor, which
		// waits for its jobs.
		go restoreInPlace(a.d.Restart, sys, a.d.Data, name, staged, a.d.Log)
	}()
}
