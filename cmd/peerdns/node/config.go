package node

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/settings"
	nodedns "peerdns/dns"
	"peerdns/http/httpx"
	"peerdns/internal/ipam"
)

// Config is what a node is started with: the command-line contract of
// `peerdns node` (cmd/peerdns fills it from flags and PEERDNS_* env).
type Config struct {
	Data      string
	AdminAddr string
	DNSAddr   string
	HTTPAddr  string
	HTTPSAddr string
	P2PAddr   string
	Bootstrap []string
	// Advertise: public or port-forwarded peer addresses (--advertise-addr)
	// put first in hellos and invites.
	Advertise []string
	Join      string
	Upstream  []string
	System    bool
	// DoTAddr is where DNS over TLS (RFC 7858) listens, with the admin
	// domain's certificate from the node's CA; "" (default): off.
	DoTAddr string
	// DNSQueryLog starts the DNS query log and per-client counters on
	// (POST /api/dns-query-log changes it live); default off.
	DNSQueryLog bool
	// DNSRecursionAllow lists the client networks that get DNS recursion
	// (forwarding upstream); nil: loopback and the private ranges
	// (nodedns.DefaultRecursionAllow), empty: nobody.
	DNSRecursionAllow []netip.Prefix

	// Settings read from the environment only (no flag): ADMIN_DOMAIN,
	// SUBNET_BASE, INITIAL_IP_INDEX, LOG_LEVEL.
	AdminDomain string
	// AdminAllowedHosts are further Host names (or name:port) the admin
	// API answers, beside its address, localhost, loopback IPs and
	// AdminDomain (ADMIN_ALLOWED_HOSTS, comma-separated).
	AdminAllowedHosts []string
	SubnetBase        string
	InitialIPIndex    int
	// ReplicaSetSize is R (REPLICA_SET_SIZE): beyond R writers a domain
	// is voted on by its replica set; 0 = the default (24).
	ReplicaSetSize int
	LogLevel       string

	// ProfileDomain is the built-in profile plugin's domain (GET
	// /api/token); "" means profile.p2p. TokenLifetimeSeconds is how long
	// its tokens are valid; 0 means an hour.
	ProfileDomain        string
	TokenLifetimeSeconds int

	// DNSCacheSize is the upstream cache's capacity (entries); 0: the
	// DNS server's default. Set by the DNS_CACHE_SIZE setting only.
	DNSCacheSize int

	// BackupRetention is how many backups DATA/backups keeps (0: 10) and
	// BackupIntervalHours the hours between automatic backups (0: none);
	// the BACKUP_RETENTION and BACKUP_INTERVAL settings.
	BackupRetention     int
	BackupIntervalHours int

	// EdgeMaxConns caps the edge's open client connections
	// (EDGE_MAX_CONNS) and EdgeConnsPerAddr one client address's share
	// of them (EDGE_CONNS_PER_ADDRESS); 0: the edge's defaults
	// (http/proxy, internal/connshare).
	EdgeMaxConns, EdgeConnsPerAddr int

	// DNSTCPMaxConns caps the DNS server's open TCP connections, and as
	// many DoT ones (DNS_TCP_MAX_CONNS), and DNSTCPConnsPerAddr one
	// client address's share of them (DNS_TCP_CONNS_PER_ADDRESS); 0: the
	// DNS server's defaults (dns.Config).
	DNSTCPMaxConns, DNSTCPConnsPerAddr int

	// WSMaxClients caps the open /ws connections (WS_MAX_CLIENTS); 0:
	// ws.DefaultMaxClients.
	WSMaxClients int

	// P2PNoTCP turns the peer protocol over TCP off (P2P_TCP=false):
	// no TCP listener on the --p2p-addr port, no TCP dials.
	P2PNoTCP bool
	// RelayOff stops this node relaying for other peers (RELAY=false);
	// it still uses relays. RelayMaxConns caps the connections relayed
	// at once (RELAY_MAX_CONNS; 0: 64) and RelayMaxMbps the relayed
	// byte rate in Mbit/s (RELAY_MAX_MBPS; 0: 400, negative: no cap).
	RelayOff      bool
	RelayMaxConns int
	RelayMaxMbps  int
	// PortMapOff stops asking the router to map the peer port with
	// NAT-PMP or UPnP IGD (PORT_MAP=false; transport/portmap).
	PortMapOff bool

	// Sources says which settings (actors/settings names) the command
	// line ("flag") or the environment ("env") gave; those win over the
	// saved settings and cannot be changed through the API.
	Sources map[string]string

	// Version is reported in logs and APIs.
	Version string

	// domainMiddleware wraps every domain actor's Receive; only this
	// package's tests set it (to crash a real domain actor).
	domainMiddleware []actor.ReceiverMiddleware
	// edgeUpstreamTimeout replaces the edge proxy's upstream timeout;
	// only this package's tests set it (to see a 504 quickly).
	edgeUpstreamTimeout time.Duration
	// edgeReadTimeout and edgeWriteTimeout replace the edge proxy's
	// client timeouts; only this package's tests set them.
	edgeReadTimeout, edgeWriteTimeout time.Duration
	// edgeMaxUploads replaces the edge proxy's uploads per upstream;
	// only this package's tests set it.
	edgeMaxUploads int64
}

// Validate reports settings that can never work, before anything starts:
// a node that would crash-loop on them later stops at once instead.
func (c Config) Validate() error {
	if c.Data == "" {
		return fmt.Errorf("data folder not set")
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		return err
	}
	if _, err := httpx.NewGuard("", append([]string{c.AdminDomain}, c.AdminAllowedHosts...)); err != nil {
		return fmt.Errorf("ADMIN_DOMAIN / ADMIN_ALLOWED_HOSTS: %w", err)
	}
	if _, err := ipam.DefaultSubnets(c.SubnetBase, c.InitialIPIndex); err != nil {
		return err
	}
	if c.InitialIPIndex < 0 {
		return fmt.Errorf("INITIAL_IP_INDEX %d must not be negative", c.InitialIPIndex)
	}
	return nil
}

// settingFields are c's fields of the settings (actors/settings reads
// and writes them by name).
func (c *Config) settingFields() settings.Fields {
	return settings.Fields{
		LogLevel: &c.LogLevel, AdminDomain: &c.AdminDomain, ProfileDomain: &c.ProfileDomain,
		AdminAddr: &c.AdminAddr, DNSAddr: &c.DNSAddr, HTTPAddr: &c.HTTPAddr, HTTPSAddr: &c.HTTPSAddr,
		P2PAddr: &c.P2PAddr, DoTAddr: &c.DoTAddr, SubnetBase: &c.SubnetBase,
		AdminAllowedHosts: &c.AdminAllowedHosts, Bootstrap: &c.Bootstrap, Advertise: &c.Advertise, Upstream: &c.Upstream,
		TokenLifetimeSeconds: &c.TokenLifetimeSeconds, DNSCacheSize: &c.DNSCacheSize, InitialIPIndex: &c.InitialIPIndex,
		ReplicaSetSize: &c.ReplicaSetSize, WSMaxClients: &c.WSMaxClients,
		BackupRetention: &c.BackupRetention, BackupIntervalHours: &c.BackupIntervalHours,
		RelayMaxConns: &c.RelayMaxConns, RelayMaxMbps: &c.RelayMaxMbps,
		EdgeMaxConns: &c.EdgeMaxConns, EdgeConnsPerAddr: &c.EdgeConnsPerAddr,
		DNSTCPMaxConns: &c.DNSTCPMaxConns, DNSTCPConnsPerAddr: &c.DNSTCPConnsPerAddr,
		DNSQueryLog: &c.DNSQueryLog, P2PNoTCP: &c.P2PNoTCP, RelayOff: &c.RelayOff, PortMapOff: &c.PortMapOff,
		DNSRecursionAllow: &c.DNSRecursionAllow, ParsePrefixes: nodedns.ParsePrefixes,
	}
}

func (c Config) tokenLifetime() time.Duration {
	if c.TokenLifetimeSeconds <= 0 {
		return time.Hour
	}
	return time.Duration(c.TokenLifetimeSeconds) * time.Second
}

// ParseLevel reads a LOG_LEVEL value: debug, info, warn or error (any
// case); "" is info.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "info":
		return slog.LevelInfo, nil
	case "debug":
		return slog.LevelDebug, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("LOG_LEVEL %q is not one of debug, info, warn, error", s)
}
