package node

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/fasthttp/router"

	"peerdns/actors/settings"
	"peerdns/http/admin"
)

// Settings are the settings actor's (actors/settings: the catalog, the
// saved values, their mapping onto Config through settings.Fields, the
// live appliers' contract). The root hands it Config's fields and the
// functions that apply a live change to the running parts.

// startSettings spawns the settings actor with the live appliers and
// registers its routes.
func (n *Node) startSettings(inForce, sources map[string]string) error {
	pid, err := n.root.Spawn("settings", settings.Props(settings.Deps{
		Store: n.nodeDB, InForce: inForce, Sources: sources, Ledger: n.ledger, Log: n.logs["core"],
		Internal: func() []string {
			ds := []string{strings.ToLower(n.cfg.AdminDomain)}
			for _, rt := range n.pluginTable.All() {
				ds = append(ds, rt.Domain)
			}
			return ds
		},
		Apply: map[string]func(string) error{
			settings.LogLevel: func(v string) error {
				l, err := ParseLevel(v)
				if err != nil {
					return err
				}
				n.level.Set(l)
				return nil
			},
			settings.UpstreamDNS:     func(v string) error { return n.dns.SetUpstreams(settings.Split(v)) },
			settings.TokenLifetime:   settings.Int(func(secs int) { n.tokenLifetime.Store(int64(time.Duration(secs) * time.Second)) }),
			settings.BackupRetention: settings.Int(n.setBackupRetention),
			settings.BackupInterval:  settings.Int(n.setBackupInterval),
			settings.DNSCacheSize:    settings.Int(n.dns.SetCacheSize),
			settings.DNSQueryLog:     func(v string) error { n.dns.SetQueryLog(strings.EqualFold(v, "true")); return nil },
		},
	}))
	if err != nil {
		return fmt.Errorf("spawn settings: %w", err)
	}
	n.settings = pid
	return nil
}

// settingsRoutes registers the settings routes on the admin router.
func (n *Node) settingsRoutes(r *router.Router) {
	admin.RegisterSettings(r, n.logs["core"], n.root.System.Root, n.settings)
}

// newLevel is the live level of every log channel and stderr.
func newLevel(l slog.Level) *slog.LevelVar {
	v := &slog.LevelVar{}
	v.Set(l)
	return v
}
