package settings

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"peerdns/internal/ipam"
	"peerdns/messages"
)

// Def is one whitelisted setting.
type Def struct {
	Name        string
	Type        string // string, number, boolean, enum, json, list
	Category    string // general, network, dns, backups
	Label       string
	Description string
	Default     string
	Options     []string // enum values
	// Live: a change applies at once (Deps.Apply has a function for it);
	// otherwise it is saved and applies at the next start.
	Live bool
	// ReadOnly: informational; update-settings refuses to change it.
	ReadOnly   bool
	Deprecated bool
	// Env is the environment variable that also sets it (and, when set,
	// wins over the saved value at start).
	Env   string
	check func(v string) error
}

// Names of the settings the node reads itself.
const (
	LogLevel           = "LOG_LEVEL"
	AdminDomain        = "ADMIN_DOMAIN"
	AdminAllowedHosts  = "ADMIN_ALLOWED_HOSTS"
	AdminAddr          = "ADMIN_ADDR"
	DNSAddr            = "DNS_ADDR"
	HTTPAddr           = "HTTP_ADDR"
	HTTPSAddr          = "HTTPS_ADDR"
	P2PAddr            = "P2P_ADDR"
	BootstrapPeers     = "BOOTSTRAP_PEERS"
	AdvertiseAddr      = "ADVERTISE_ADDR"
	Subnets            = "SUBNETS"
	SubnetBase         = "SUBNET_BASE"
	InitialIPIndex     = "INITIAL_IP_INDEX"
	InternalDomains    = "INTERNAL_DOMAINS"
	UpstreamDNS        = "UPSTREAM_DNS"
	DNSCacheSize       = "DNS_CACHE_SIZE"
	DNSRecursionAllow  = "DNS_RECURSION_ALLOW"
	DNSQueryLog        = "DNS_QUERY_LOG"
	DoTAddr            = "DOT_ADDR"
	ProfileDomain      = "PROFILE_DOMAIN"
	TokenLifetime      = "TOKEN_LIFETIME"
	WSMaxClients       = "WS_MAX_CLIENTS"
	BackupRetention    = "BACKUP_RETENTION"
	BackupInterval     = "BACKUP_INTERVAL"
	ReplicaSetSize     = "REPLICA_SET_SIZE"
	P2PTCP             = "P2P_TCP"
	Relay              = "RELAY"
	RelayMaxConns      = "RELAY_MAX_CONNS"
	RelayMaxMbps       = "RELAY_MAX_MBPS"
	PortMap            = "PORT_MAP"
	EdgeMaxConns       = "EDGE_MAX_CONNS"
	EdgeConnsPerAddr   = "EDGE_CONNS_PER_ADDRESS"
	DNSTCPMaxConns     = "DNS_TCP_MAX_CONNS"
	DNSTCPConnsPerAddr = "DNS_TCP_CONNS_PER_ADDRESS"
)

// Catalog is the whitelist, in the order the panel lists it.
var Catalog = []Def{
	{Name: LogLevel, Type: "enum", Category: "general", Label: "Log level", Env: "LOG_LEVEL",
		Description: "Least severe level written to the log channels and stderr.", Default: "info",
		Options: []string{"debug", "info", "warn", "error"}, Live: true, check: oneOf("debug", "info", "warn", "error")},
	{Name: AdminDomain, Type: "string", Category: "network", Label: "Admin domain", Env: "ADMIN_DOMAIN",
		Description: "Internal domain that serves the admin API and panel through the edge proxy.", Default: "admin.p2p",
		check: domainName},
	{Name: ProfileDomain, Type: "string", Category: "network", Label: "Profile domain", Env: "PROFILE_DOMAIN",
		Description: "Internal domain of the built-in profile plugin, where GET /api/token gives write tokens for plugin domains.", Default: "profile.p2p",
		check: domainName},
	{Name: TokenLifetime, Type: "number", Category: "general", Label: "Token lifetime (seconds)", Live: true,
		Description: "How long a write token from GET /api/token on the profile domain is valid.", Default: "3600", check: intRange(60, 30*24*3600)},
	{Name: AdminAllowedHosts, Type: "list", Category: "network", Label: "Extra admin host names", Env: "ADMIN_ALLOWED_HOSTS",
		Description: "Comma-separated Host names (or name:port) the admin API also answers, beside its address, localhost, loopback IPs and the admin domain.",
		check:       hostList},
	{Name: AdminAddr, Type: "string", Category: "network", Label: "Admin address", Env: "PEERDNS_ADMIN_ADDR",
		Description: "host:port of the admin API, WebSocket and panel (--admin-addr).", Default: "127.0.0.1:7710", check: hostPort},
	{Name: DNSAddr, Type: "string", Category: "network", Label: "DNS address", Env: "PEERDNS_DNS_ADDR",
		Description: "host:port the DNS server answers on, UDP and TCP (--dns-addr).", Default: "127.0.0.1:7753", check: hostPort},
	{Name: HTTPAddr, Type: "string", Category: "network", Label: "Edge HTTP address", Env: "PEERDNS_HTTP_ADDR",
		Description: "host:port of the edge proxy's HTTP listener (--http-addr).", Default: "127.0.0.1:7780", check: hostPort},
	{Name: HTTPSAddr, Type: "string", Category: "network", Label: "Edge HTTPS address", Env: "PEERDNS_HTTPS_ADDR",
		Description: "host:port of the edge proxy's HTTPS listener (--https-addr).", Default: "127.0.0.1:7743", check: hostPort},
	{Name: P2PAddr, Type: "string", Category: "network", Label: "Peer address", Env: "PEERDNS_P2P_ADDR",
		Description: "host:port of the peer endpoint: QUIC on UDP, and TCP on the same port (--p2p-addr).", Default: "0.0.0.0:7740", check: hostPort},
	{Name: BootstrapPeers, Type: "list", Category: "network", Label: "Bootstrap peers", Env: "PEERDNS_BOOTSTRAP",
		Description: "Comma-separated peer addresses (host:port, or peer id@host:port) dialled at start (--bootstrap).", check: bootstrapPeers},
	{Name: AdvertiseAddr, Type: "list", Category: "network", Label: "Advertised peer addresses", Env: "PEERDNS_ADVERTISE_ADDR",
		Description: "Comma-separated public or port-forwarded host:port addresses peers can dial this node at, put first in hellos and invites (--advertise-addr); observed and interface addresses follow.", check: hostPortList},
	{Name: Subnets, Type: "json", Category: "network", Label: "Subnets",
		Description: "JSON array of {base, cidr, startIndex, name} the local IPs of domains are taken from; the same rules as POST /api/subnets. Unset: one subnet from SUBNET_BASE.",
		check:       subnets},
	{Name: SubnetBase, Type: "string", Category: "network", Label: "Subnet base (deprecated)", Env: "SUBNET_BASE", Deprecated: true,
		Description: "Deprecated: use SUBNETS or /api/subnets. IPv4 address or prefix (a bare address means /16) of the default subnet when no subnets are set.",
		Default:     ipam.DefaultBase, check: subnetBase},
	{Name: InitialIPIndex, Type: "number", Category: "network", Label: "Initial IP index (deprecated)", Env: "INITIAL_IP_INDEX", Deprecated: true,
		Description: "Deprecated: use SUBNETS or /api/subnets. First host number handed out in the default subnet.",
		Default:     "2", check: intRange(0, 254)},
	{Name: InternalDomains, Type: "list", Category: "network", Label: "Internal domains", ReadOnly: true,
		Description: "Informational: the internal domains this node serves itself (discovered: the admin domain and plugin domains); they cannot be claimed."},
	{Name: UpstreamDNS, Type: "list", Category: "dns", Label: "Upstream DNS servers", Env: "PEERDNS_UPSTREAM", Live: true,
		Description: "Comma-separated ip or ip:port of the resolvers that answer names outside the node's own data, tried in order (--upstream); empty: the system's resolv.conf.",
		check:       upstreams},
	{Name: DNSCacheSize, Type: "number", Category: "dns", Label: "DNS cache size", Env: "PEERDNS_DNS_CACHE_SIZE", Live: true,
		Description: "Entries the upstream answer cache keeps (least recently used evicted).", Default: "10000", check: intRange(1, 10_000_000)},
	{Name: DNSRecursionAllow, Type: "list", Category: "dns", Label: "DNS recursion allowed for", Env: "PEERDNS_DNS_RECURSION_ALLOW",
		Description: "Client networks that get recursion (--dns-recursion-allow); empty: loopback and private ranges; \"none\": nobody.",
		check:       prefixes},
	{Name: DNSQueryLog, Type: "enum", Category: "dns", Label: "DNS query log", Env: "PEERDNS_DNS_QUERY_LOG", Live: true,
		Description: "Log DNS queries to the dns channel (at most 50 lines a second) and count them per client (GET /api/dns-clients) (--dns-query-log).",
		Default:     "false", Options: []string{"false", "true"}, check: oneOf("false", "true")},
	{Name: DoTAddr, Type: "string", Category: "dns", Label: "DNS-over-TLS address", Env: "PEERDNS_DOT_ADDR",
		Description: "host:port of the DNS-over-TLS listener (RFC 7858) with the admin domain's certificate (--dot-addr); empty: off.",
		check:       optional(hostPort)},
	{Name: EdgeMaxConns, Type: "number", Category: "network", Label: "Edge connections at most", Env: "EDGE_MAX_CONNS",
		Description: "Client connections the edge holds open at once over HTTP, HTTPS and HTTP/3; past it new TCP ones wait until one closes, new HTTP/3 ones are closed. Default 4096, or a quarter of the open-file limit when less.",
		Default:     "4096", check: intRange(16, 1_000_000)},
	{Name: EdgeConnsPerAddr, Type: "number", Category: "network", Label: "Edge connections per client address", Env: "EDGE_CONNS_PER_ADDRESS",
		Description: "Edge connections one client address (an IPv6 client's /64) may hold at once; more are closed. Default 256, or a quarter of the edge's maximum when less; loopback is not counted. Raise it for a reverse proxy or CDN in front of the node.",
		Default:     "256", check: intRange(1, 1_000_000)},
	{Name: DNSTCPMaxConns, Type: "number", Category: "dns", Label: "DNS TCP connections at most", Env: "DNS_TCP_MAX_CONNS",
		Description: "Connections the DNS server holds open at once on TCP, and as many on DNS over TLS; past it new ones are closed. Default 1024, or a quarter of the open-file limit when less.",
		Default:     "1024", check: intRange(16, 1_000_000)},
	{Name: DNSTCPConnsPerAddr, Type: "number", Category: "dns", Label: "DNS TCP connections per client address", Env: "DNS_TCP_CONNS_PER_ADDRESS",
		Description: "DNS TCP (and DNS over TLS) connections one client address (an IPv6 client's /64) may hold at once; more are closed. Default 256, or a quarter of the DNS maximum when less; loopback is not counted. Raise it for a load balancer or forwarding resolver that brings many clients from one address.",
		Default:     "256", check: intRange(1, 1_000_000)},
	{Name: WSMaxClients, Type: "number", Category: "general", Label: "WebSocket clients at most",
		Description: "Open /ws connections the node accepts; more are answered 503.", Default: "256", check: intRange(1, 100000)},
	{Name: P2PTCP, Type: "enum", Category: "network", Label: "Peer protocol over TCP", Env: "P2P_TCP",
		Description: "Also listen on TCP at the peer address's port and dial peers over TCP when QUIC (UDP) does not connect, for networks that drop UDP.",
		Default:     "true", Options: []string{"true", "false"}, check: oneOf("true", "false")},
	{Name: Relay, Type: "enum", Category: "network", Label: "Relay for other peers", Env: "RELAY",
		Description: "Relay encrypted connections between two writers of the network that cannot reach each other directly (they see only ciphertext); false turns relaying for others off.",
		Default:     "true", Options: []string{"true", "false"}, check: oneOf("true", "false")},
	{Name: PortMap, Type: "enum", Category: "network", Label: "Map the peer port on the router", Env: "PORT_MAP",
		Description: "Ask the router (the default route's gateway, by NAT-PMP or UPnP IGD) to forward the peer port, UDP and TCP, and advertise the public address it maps; false: never ask.",
		Default:     "true", Options: []string{"true", "false"}, check: oneOf("true", "false")},
	{Name: RelayMaxConns, Type: "number", Category: "network", Label: "Relayed connections at most", Env: "RELAY_MAX_CONNS",
		Description: "Connections this node relays at once (and at most 8 per requesting peer); more are refused and counted.", Default: "64", check: intRange(1, 100000)},
	{Name: RelayMaxMbps, Type: "number", Category: "network", Label: "Relayed Mbit/s at most", Env: "RELAY_MAX_MBPS",
		Description: "Byte rate of all relayed connections together, both ways, in Mbit/s; over it they are slowed. 0: no cap.", Default: "400", check: intRange(0, 1000000)},
	{Name: BackupRetention, Type: "number", Category: "backups", Label: "Backups kept", Live: true,
		Description: "How many backups DATA/backups keeps; older ones are removed before a new one is written.", Default: "10", check: intRange(1, 1000)},
	{Name: BackupInterval, Type: "number", Category: "backups", Label: "Backup every (hours)", Live: true,
		Description: "Hours between automatic backups; 0 turns them off.", Default: "0", check: intRange(0, 24*365)},
	{Name: ReplicaSetSize, Type: "number", Category: "network", Label: "Replica set size (R)", Env: "PEERDNS_REPLICA_SET_SIZE",
		Description: "Up to this many writers every active writer votes on every domain; beyond it a domain's votes come from the R writers closest to its name. Every node of a network must use the same value.",
		Default:     "24", check: intRange(3, 1000)},
}

// Lookup finds a setting by name.
func Lookup(name string) (Def, bool) {
	for _, d := range Catalog {
		if d.Name == name {
			return d, true
		}
	}
	return Def{}, false
}

// Validate checks one value against its setting.
func (d Def) Validate(v string) error {
	if d.ReadOnly {
		return fmt.Errorf("%s is informational and cannot be changed", d.Name)
	}
	if d.check == nil {
		return nil
	}
	if err := d.check(v); err != nil {
		return fmt.Errorf("%s: %v", d.Name, err)
	}
	return nil
}

// Canonical is a valid value v in the spelling the node lists a value in
// force (Fields.InForce): the text update-settings saves, so that after
// the restart it asks for, the saved value and the one in force are the
// same text (GET lists no restart as pending).
func (d Def) Canonical(v string) string {
	v = strings.TrimSpace(v)
	switch {
	case d.Type == "enum":
		return strings.ToLower(v)
	case d.Type == "number":
		if n, err := strconv.Atoi(v); err == nil {
			return strconv.Itoa(n)
		}
	case d.Name == DNSRecursionAllow:
		if strings.EqualFold(v, "none") {
			return "none"
		}
		var out []string
		for _, f := range Split(v) {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				a, _ := netip.ParseAddr(f) // validated
				p = netip.PrefixFrom(a, a.BitLen())
			}
			out = append(out, p.Masked().String())
		}
		return strings.Join(out, ",")
	case d.Type == "list":
		return strings.Join(Split(v), ",")
	}
	return v
}

// Meta is the setting's metadata as the API lists it.
func (d Def) Meta(source string) messages.SettingMeta {
	return messages.SettingMeta{Type: d.Type, Category: d.Category, Label: d.Label, Description: d.Description,
		Default: d.Default, Options: d.Options, RestartRequired: !d.Live, ReadOnly: d.ReadOnly,
		Deprecated: d.Deprecated, Source: source}
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, x := range vals {
			if strings.EqualFold(strings.TrimSpace(v), x) {
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %s", v, strings.Join(vals, ", "))
	}
}

func intRange(lo, hi int) func(string) error {
	return func(v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		if n < lo || n > hi {
			return fmt.Errorf("%d is out of range %d..%d", n, lo, hi)
		}
		return nil
	}
}

func hostname(v string) error {
	if _, err := messages.ParseHost(strings.TrimSpace(v)); err != nil || strings.TrimSpace(v) == "" {
		return fmt.Errorf("%q is not a domain name", v)
	}
	return nil
}

// domainName accepts a DNS name the node can answer and serve (no port,
// no empty label), as add-domain does.
func domainName(v string) error {
	if _, err := messages.NormalizeDomain(v); err != nil {
		return fmt.Errorf("%q is not a domain name", v)
	}
	return nil
}

func hostList(v string) error {
	return messages.CheckHosts(Split(v))
}

func hostPort(v string) error {
	host, port, err := net.SplitHostPort(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("%q is not host:port", v)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%q: port must be 0..65535", v)
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil && hostname(host) != nil {
			return fmt.Errorf("%q: host is neither an IP address nor a name", v)
		}
	}
	return nil
}

// optional accepts an empty value, else what check accepts.
func optional(check func(string) error) func(string) error {
	return func(v string) error {
		if strings.TrimSpace(v) == "" {
			return nil
		}
		return check(v)
	}
}

func hostPortList(v string) error {
	for _, p := range Split(v) {
		if err := hostPort(p); err != nil {
			return err
		}
	}
	return nil
}

// bootstrapPeers takes what the peer actor dials: host:port, or
// <peer id>@host:port (the id 64 hex characters).
func bootstrapPeers(v string) error {
	for _, p := range Split(v) {
		if id, addr, ok := strings.Cut(p, "@"); ok {
			if !messages.ValidPeerID(id) {
				return fmt.Errorf("%q: peer id %q is not 64 lowercase hex characters", p, id)
			}
			p = addr
		}
		if err := hostPort(p); err != nil {
			return err
		}
	}
	return nil
}

func upstreams(v string) error {
	for _, u := range Split(v) {
		if _, err := netip.ParseAddrPort(u); err == nil {
			continue
		}
		if _, err := netip.ParseAddr(strings.Trim(u, "[]")); err != nil {
			return fmt.Errorf("%q: want ip or ip:port", u)
		}
	}
	return nil
}

func prefixes(v string) error {
	if strings.EqualFold(strings.TrimSpace(v), "none") {
		return nil
	}
	for _, p := range Split(v) {
		if _, err := netip.ParsePrefix(p); err == nil {
			continue
		}
		if _, err := netip.ParseAddr(p); err != nil {
			return fmt.Errorf("%q is neither a network (CIDR) nor an address", p)
		}
	}
	return nil
}

func subnetBase(v string) error {
	_, err := ipam.DefaultSubnets(strings.TrimSpace(v), 0)
	return err
}

func subnets(v string) error {
	var list []messages.Subnet
	if err := json.Unmarshal([]byte(v), &list); err != nil {
		return fmt.Errorf("not a JSON array of subnets: %s", messages.JSONError(err, "the value"))
	}
	if _, errs := ipam.Validate(list); len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Split reads a comma-separated list (spaces trimmed, empty items
// dropped).
func Split(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
