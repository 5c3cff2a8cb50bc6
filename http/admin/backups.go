package admin

// Backup routes. The backups actor does the work (actors/backups over
// internal/backup; the composition root hands these routes its client
// as Backups); these handlers map its errors to the spec's statuses:
// a name that is not a plain backup name is 400 everywhere, an unknown
// backup is 404 for metadata (the spec's) and 500 with "no such backup"
// for delete and restore (the spec gives those no 404), a damaged or
// foreign archive is a 500 that says so, and the node is unchanged.

import (
	"errors"
	"log/slog"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
	"peerdns/internal/backup"
)

// Backups is what the routes need from the backups actor.
type Backups interface {
	CreateBackup() (string, error)
	ListBackups() ([]backup.Info, error)
	BackupMetadata(name string) (backup.Meta, error)
	DeleteBackup(name string) error
	// RestoreBackup checks and stages the backup, then swaps it in and
	// restarts the node's services after answering.
	RestoreBackup(name string) error
}

// RegisterBackups adds the backup routes.
func RegisterBackups(r *router.Router, log *slog.Logger, b Backups) {
	r.GET("/api/backups", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		list, err := b.ListBackups()
		if err != nil {
			return httpx.Internal("backups: %v", err)
		}
		return httpx.JSON(ctx, 200, list)
	}))
	r.POST("/api/backups/create", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		path, err := b.CreateBackup()
		if err != nil {
			return httpx.Internal("backup: %v", err)
		}
		return httpx.JSON(ctx, 200, map[string]any{"success": true, "path": path})
	}))
	r.POST("/api/backups/restore", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		var req struct {
			BackupName string `json:"backupName"`
		}
		if err := httpx.DecodeJSON(ctx, &req, 400); err != nil {
			return err
		}
		if req.BackupName == "" {
			return httpx.BadRequest("backupName is required")
		}
		if err := b.RestoreBackup(req.BackupName); err != nil {
			return backupErr(err, 500)
		}
		return httpx.JSON(ctx, 200, map[string]any{"success": true,
			"message": "backup " + req.BackupName + " checked; the node is restoring it and restarting its services (a few seconds)"})
	}))
	r.DELETE("/api/backups/{id}", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		id, err := backupID(ctx)
		if err != nil {
			return err
		}
		if err := b.DeleteBackup(id); err != nil {
			return backupErr(err, 500)
		}
		return httpx.JSON(ctx, 200, map[string]any{"success": true, "message": "backup " + id + " deleted"})
	}))
	r.GET("/api/backups/{id}/metadata", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		id, err := backupID(ctx)
		if err != nil {
			return err
		}
		m, err := b.BackupMetadata(id)
		if err != nil {
			return backupErr(err, 404)
		}
		return httpx.JSON(ctx, 200, m)
	}))
}

// backupID is the {id} of a backup route, percent-decoded as every
// path parameter is (pathParam); an escape that does not decode is an
// invalid name, 400.
func backupID(ctx *fasthttp.RequestCtx) (string, error) {
	id, err := pathParam(ctx, "id")
	if err != nil {
		return "", httpx.BadRequest("not a backup name: %q", ctx.UserValue("id"))
	}
	return id, nil
}

// backupErr maps a backup error; notFound is the status of an unknown
// backup.
func backupErr(err error, notFound int) error {
	switch {
	case errors.Is(err, backup.ErrBadName):
		return httpx.BadRequest("%v", err)
	case errors.Is(err, backup.ErrNotFound):
		return httpx.Errorf(notFound, "%v", err)
	}
	return httpx.Internal("%v", err)
}
