package node

import (
	"cmp"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/fasthttp/router"

	"peerdns/actors/consensus"
	"peerdns/actors/settings"
	nodedns "peerdns/dns"
	"peerdns/http/admin"
	"peerdns/internal/store"
	"peerdns/transport"
)

// applySaved lays the settings saved through the API over cfg, except
// those the command line or the environment gave (cfg.Sources), and
// returns the result with every setting's value in force and its source.
// Saved values were validated when saved; one that no longer parses is
// skipped with a warning (the default or the flag's value stays).
func applySaved(cfg Config, db *store.DB, warn func(msg string, args ...any)) (Config, map[string]string, map[string]string, error) {
	if cfg.ProfileDomain == "" {
		cfg.ProfileDomain = "profile.p2p"
	}
	saved, err := settings.LoadSaved(db)
	if err != nil {
		return cfg, nil, nil, fmt.Errorf("saved settings: %w", err)
	}
	src := map[string]string{}
	for k, v := range cfg.Sources {
		src[k] = v
	}
	for name, v := range saved {
		if s := src[name]; s == "flag" || s == "env" {
			continue
		}
		if err := setConfig(&cfg, name, v); err != nil {
			warn("saved setting ignored", "setting", name, "err", err)
			continue
		}
		src[name] = "saved"
	}
	return cfg, inForce(cfg), src, nil
}

// setConfig sets the Config field of one setting.
func setConfig(c *Config, name, v string) error {
	d, ok := settings.Lookup(name)
	if !ok {
		return fmt.Errorf("not a setting")
	}
	if err := d.Validate(v); err != nil {
		return err
	}
	v = strings.TrimSpace(v)
	switch name {
	case settings.LogLevel:
		c.LogLevel = v
	case settings.AdminDomain:
		c.AdminDomain = v
	case settings.ProfileDomain:
		c.ProfileDomain = v
	case settings.TokenLifetime:
		c.TokenLifetimeSeconds, _ = strconv.Atoi(v)
	case settings.AdminAllowedHosts:
		c.AdminAllowedHosts = settings.Split(v)
	case settings.AdminAddr:
		c.AdminAddr = v
	case settings.DNSAddr:
		c.DNSAddr = v
	case settings.HTTPAddr:
		c.HTTPAddr = v
	case settings.HTTPSAddr:
		c.HTTPSAddr = v
	case settings.P2PAddr:
		c.P2PAddr = v
	case settings.BootstrapPeers:
		c.Bootstrap = settings.Split(v)
	case settings.AdvertiseAddr:
		c.Advertise = settings.Split(v)
	case settings.UpstreamDNS:
		c.Upstream = settings.Split(v)
	case settings.DNSCacheSize:
		c.DNSCacheSize, _ = strconv.Atoi(v)
	case settings.DNSRecursionAllow:
		acl, err := nodedns.ParsePrefixes(v)
		if err != nil {
			return err
		}
		c.DNSRecursionAllow = acl
	case settings.DNSQueryLog:
		c.DNSQueryLog = strings.EqualFold(v, "true")
	case settings.DoTAddr:
		c.DoTAddr = v
	case settings.SubnetBase:
		c.SubnetBase = v
	case settings.InitialIPIndex:
		c.InitialIPIndex, _ = strconv.Atoi(v)
	case settings.ReplicaSetSize:
		c.ReplicaSetSize, _ = strconv.Atoi(v)
	case settings.WSMaxClients:
		c.WSMaxClients, _ = strconv.Atoi(v)
	case settings.BackupRetention:
		c.BackupRetention, _ = strconv.Atoi(v)
	case settings.BackupInterval:
		c.BackupIntervalHours, _ = strconv.Atoi(v)
	case settings.P2PTCP:
		c.P2PNoTCP = strings.EqualFold(v, "false")
	case settings.Relay:
		c.RelayOff = strings.EqualFold(v, "false")
	case settings.PortMap:
		c.PortMapOff = strings.EqualFold(v, "false")
	case settings.RelayMaxConns:
		c.RelayMaxConns, _ = strconv.Atoi(v)
	case settings.RelayMaxMbps:
		c.RelayMaxMbps, _ = strconv.Atoi(v)
		if c.RelayMaxMbps == 0 {
			c.RelayMaxMbps = -1 // the setting's 0 is "no cap"
		}
	}
	// SUBNETS lives in the ledger; INTERNAL_DOMAINS is informational.
	return nil
}

// inForce is every setting's value in cfg, as text.
func inForce(c Config) map[string]string {
	acl := make([]string, 0, len(c.DNSRecursionAllow))
	for _, p := range c.DNSRecursionAllow {
		acl = append(acl, p.String())
	}
	cache := ""
	if c.DNSCacheSize > 0 {
		cache = strconv.Itoa(c.DNSCacheSize)
	}
	m := map[string]string{
		settings.LogLevel: strings.ToLower(c.LogLevel), settings.AdminDomain: c.AdminDomain,
		settings.AdminAllowedHosts: strings.Join(c.AdminAllowedHosts, ","),
		settings.AdminAddr:         c.AdminAddr, settings.DNSAddr: c.DNSAddr, settings.HTTPAddr: c.HTTPAddr,
		settings.HTTPSAddr: c.HTTPSAddr, settings.P2PAddr: c.P2PAddr,
		settings.BootstrapPeers: strings.Join(c.Bootstrap, ","), settings.UpstreamDNS: strings.Join(c.Upstream, ","),
		settings.AdvertiseAddr:     strings.Join(c.Advertise, ","),
		settings.DNSRecursionAllow: strings.Join(acl, ","), settings.SubnetBase: c.SubnetBase,
		settings.InitialIPIndex: strconv.Itoa(c.InitialIPIndex),
		settings.ProfileDomain:  c.ProfileDomain, settings.TokenLifetime: strconv.Itoa(int(c.tokenLifetime() / time.Second)),
		settings.BackupRetention: strconv.Itoa(max(c.BackupRetention, 1)), settings.BackupInterval: strconv.Itoa(c.BackupIntervalHours),
		settings.DNSQueryLog: strconv.FormatBool(c.DNSQueryLog), settings.DoTAddr: c.DoTAddr,
		settings.ReplicaSetSize: strconv.Itoa(replicaSetSize(c.ReplicaSetSize)),
	}
	if c.BackupRetention == 0 {
		m[settings.BackupRetention] = "10"
	}
	m[settings.P2PTCP] = strconv.FormatBool(!c.P2PNoTCP)
	m[settings.Relay] = strconv.FormatBool(!c.RelayOff)
	m[settings.PortMap] = strconv.FormatBool(!c.PortMapOff)
	m[settings.RelayMaxConns] = strconv.Itoa(cmp.Or(c.RelayMaxConns, transport.DefaultRelayMaxConns))
	switch {
	case c.RelayMaxMbps < 0:
		m[settings.RelayMaxMbps] = "0"
	case c.RelayMaxMbps == 0:
		m[settings.RelayMaxMbps] = strconv.Itoa(int(transport.DefaultRelayRate * 8 / 1e6))
	default:
		m[settings.RelayMaxMbps] = strconv.Itoa(c.RelayMaxMbps)
	}
	if c.WSMaxClients == 0 {
		m[settings.WSMaxClients] = "256"
	}
	if cache != "" {
		m[settings.DNSCacheSize] = cache
	}
	if c.DNSRecursionAllow != nil && len(c.DNSRecursionAllow) == 0 {
		m[settings.DNSRecursionAllow] = "none"
	}
	return m
}

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
			settings.TokenLifetime:   applyInt(func(secs int) { n.tokenLifetime.Store(int64(time.Duration(secs) * time.Second)) }),
			settings.BackupRetention: applyInt(n.setBackupRetention),
			settings.BackupInterval:  applyInt(n.setBackupInterval),
			settings.DNSCacheSize:    applyInt(n.dns.SetCacheSize),
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

// applyInt is the live applier of a whole-number setting (validated
// already; the parse only guards the type).
func applyInt(set func(int)) func(string) error {
	return func(v string) error {
		i, err := strconv.Atoi(v)
		if err != nil {
			return err
		}
		set(i)
		return nil
	}
}

// newLevel is the live level of every log channel and stderr.
func newLevel(l slog.Level) *slog.LevelVar {
	v := &slog.LevelVar{}
	v.Set(l)
	return v
}

// replicaSetSize is the R in force: the setting, or the default.
func replicaSetSize(n int) int {
	if n <= 0 {
		return consensus.DefaultReplicas
	}
	return n
}
