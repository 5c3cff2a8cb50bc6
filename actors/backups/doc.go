// Package backups is the actor that owns DATA/backups: it writes a
// backup on request and, with BACKUP_INTERVAL > 0, whenever none is
// dated within that interval of the clock (checked on a tick, once a
// minute; one dated further ahead, written while the clock was wrong,
// does not hold them back); it keeps
// BACKUP_RETENTION of them (older ones are removed before a new one is
// written); it lists them, reads their metadata, deletes them, and
// stages a restore. The archive format is internal/backup's.
//
// A backup is a consistent copy of the node's state taken from the
// state's owners, never a copy of a file being written: ledger.db and
// node.db through their stores' Snapshot (one buntdb read transaction
// each; the Snapshotter interface declared here), the plugin databases
// through the plugins supervisor that owns them (plugin.SnapshotDatabases,
// answered between two of its messages, so no plugin loads or stops
// meanwhile), and identity.key, ca/ and plugins/ as files.
//
// Writing a backup and staging a restore can take a while (up to
// internal/backup's size limits), so they run as jobs beside the actor:
// the actor starts a job and goes on answering, the job answers the
// requester itself. Listing, metadata and delete are quick folder
// operations the actor does at once. Jobs may overlap, as HTTP requests
// may (two creates write two archives). An automatic backup is not
// started while the previous automatic one still runs, and a restore
// asked while another one runs (from its request until the restart
// that swaps it in) is refused: it would be swapped in over the first. When the actor
// stops it waits for the jobs in flight, so the stores they read close
// only after them (the composition root stops this actor before the
// plugins supervisor and the stores).
//
// Restoring. Restore{Name} stages the backup beside the data
// (internal/backup.Stage into DATA/.restore-<random>: every entry
// checked, both stores open, the identity is this node's); any problem
// is the request's error and nothing changes. Once it is sound a backup
// of the current state is written (so the restore can be undone; if that
// fails, on a full disk say, the restore is cancelled and that is the
// request's error), the request is answered, and the staged state is
// swapped in (restore.go): the
// WebSocket clients are told system-reset, every part of the node stops
// (this actor and the stores too), the current entries move aside and
// the staged ones in, and the node starts again; if it does not start,
// the previous entries go back and it starts on them. A swap that fails
// and cannot move back what it moved (a failing disk) stops the node;
// that swap, as one a crash cut short, is undone at the next start (RecoverSwap, from a
// journal the swap writes first: recover.go): the node starts on the
// state before the restore, and the restored entries that had come in
// are kept in DATA/.failed-restore-<time>. An entry the data folder
// holds as a link (DATA/plugins -> /srv/plugins, kept on another disk)
// is moved aside and dropped as a link: the restored folder comes in as
// a folder of DATA itself, and the link's target is left as it was,
// neither emptied nor written (a swap is renames within DATA, which
// cannot reach a folder on another file system). An operator who keeps
// the folder elsewhere moves the restored one there and puts the link
// back, with the node stopped. Stopping and
// starting the node's parts is the one step only the owner of the
// process can do: the composition root (cmd/peerdns/node) hands it in
// as Deps.Restart (the Restarter interface declared here) and keeps
// nothing else of a restore.
//
// The admin routes reach the actor through Client, which implements the
// small interface http/admin declares (admin.Backups); http/ never
// imports this package. Timeouts: quick requests wait up to
// Client.Timeout (30 s), creates and restores up to Client.JobTimeout
// (1 h: an archive may hold gigabytes); a timeout is an error the route
// answers with 500, and a create that times out still finishes.
package backups
