package settings

import (
	"cmp"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"peerdns/actors/consensus"
	"peerdns/internal/store"
	"peerdns/transport"
)

// Fields points at the typed fields a node's configuration keeps its
// settings in (the composition root's Config hands out one pointer per
// field and nothing else). Through it this package, the owner of the
// settings, reads a setting's text into its field (Set), writes every
// field back as the text the API lists (InForce) and lays the saved
// values over the configuration at start (ApplySaved): the mapping
// between the catalog's names and a node's typed configuration lives
// here, beside the catalog, not in the root.
//
// Every pointer must be set. SUBNETS is the ledger's and INTERNAL_DOMAINS
// informational, so neither has a field.
type Fields struct {
	LogLevel, AdminDomain, ProfileDomain         *string
	AdminAddr, DNSAddr, HTTPAddr, HTTPSAddr      *string
	P2PAddr, DoTAddr, SubnetBase                 *string
	AdminAllowedHosts, Bootstrap, Advertise      *[]string
	Upstream                                     *[]string
	TokenLifetimeSeconds, DNSCacheSize           *int
	InitialIPIndex, ReplicaSetSize, WSMaxClients *int
	BackupRetention, BackupIntervalHours         *int
	RelayMaxConns                                *int
	EdgeMaxConns, EdgeConnsPerAddr               *int // 0: the edge's defaults
	DNSTCPMaxConns, DNSTCPConnsPerAddr           *int // 0: the DNS server's defaults
	RelayMaxMbps                                 *int // negative: no cap (the setting's 0)
	DNSQueryLog                                  *bool
	P2PNoTCP, RelayOff, PortMapOff               *bool // the negations of P2P_TCP, RELAY, PORT_MAP
	DNSRecursionAllow                            *[]netip.Prefix
	// ParsePrefixes reads a DNS_RECURSION_ALLOW value as the DNS server
	// does (dns.ParsePrefixes, handed in: actors do not import dns/).
	ParsePrefixes func(string) ([]netip.Prefix, error)
}

// Defaults the in-force listing shows for fields left at zero.
const (
	defaultProfileDomain = "profile.p2p"
	defaultTokenSeconds  = 3600
	defaultBackups       = 10
	defaultWSClients     = 256
)

// Set validates v as setting name (Def.Validate) and sets its field.
func (f Fields) Set(name, v string) error {
	d, ok := Lookup(name)
	if !ok {
		return fmt.Errorf("not a setting")
	}
	if err := d.Validate(v); err != nil {
		return err
	}
	v = strings.TrimSpace(v)
	atoi := func(p *int) { *p, _ = strconv.Atoi(v) } // validated already
	switch name {
	case LogLevel:
		*f.LogLevel = v
	case AdminDomain:
		*f.AdminDomain = v
	case ProfileDomain:
		*f.ProfileDomain = v
	case TokenLifetime:
		atoi(f.TokenLifetimeSeconds)
	case AdminAllowedHosts:
		*f.AdminAllowedHosts = Split(v)
	case AdminAddr:
		*f.AdminAddr = v
	case DNSAddr:
		*f.DNSAddr = v
	case HTTPAddr:
		*f.HTTPAddr = v
	case HTTPSAddr:
		*f.HTTPSAddr = v
	case P2PAddr:
		*f.P2PAddr = v
	case BootstrapPeers:
		*f.Bootstrap = Split(v)
	case AdvertiseAddr:
		*f.Advertise = Split(v)
	case UpstreamDNS:
		*f.Upstream = Split(v)
	case DNSCacheSize:
		atoi(f.DNSCacheSize)
	case DNSRecursionAllow:
		acl, err := f.ParsePrefixes(v)
		if err != nil {
			return err
		}
		*f.DNSRecursionAllow = acl
	case DNSQueryLog:
		*f.DNSQueryLog = strings.EqualFold(v, "true")
	case DoTAddr:
		*f.DoTAddr = v
	case SubnetBase:
		*f.SubnetBase = v
	case InitialIPIndex:
		atoi(f.InitialIPIndex)
	case ReplicaSetSize:
		atoi(f.ReplicaSetSize)
	case WSMaxClients:
		atoi(f.WSMaxClients)
	case BackupRetention:
		atoi(f.BackupRetention)
	case BackupInterval:
		atoi(f.BackupIntervalHours)
	case P2PTCP:
		*f.P2PNoTCP = strings.EqualFold(v, "false")
	case Relay:
		*f.RelayOff = strings.EqualFold(v, "false")
	case PortMap:
		*f.PortMapOff = strings.EqualFold(v, "false")
	case RelayMaxConns:
		atoi(f.RelayMaxConns)
	case EdgeMaxConns:
		atoi(f.EdgeMaxConns)
	case EdgeConnsPerAddr:
		atoi(f.EdgeConnsPerAddr)
	case DNSTCPMaxConns:
		atoi(f.DNSTCPMaxConns)
	case DNSTCPConnsPerAddr:
		atoi(f.DNSTCPConnsPerAddr)
	case RelayMaxMbps:
		atoi(f.RelayMaxMbps)
		if *f.RelayMaxMbps == 0 {
			*f.RelayMaxMbps = -1 // the setting's 0 is "no cap"
		}
	}
	return nil
}

// InForce is every field's value as text, with the defaults the node
// uses for fields left at zero.
func (f Fields) InForce() map[string]string {
	acl := make([]string, 0, len(*f.DNSRecursionAllow))
	for _, p := range *f.DNSRecursionAllow {
		acl = append(acl, p.String())
	}
	token := *f.TokenLifetimeSeconds
	if token <= 0 {
		token = defaultTokenSeconds
	}
	replicas := *f.ReplicaSetSize
	if replicas <= 0 {
		replicas = consensus.DefaultReplicas
	}
	m := map[string]string{
		LogLevel: strings.ToLower(*f.LogLevel), AdminDomain: *f.AdminDomain,
		AdminAllowedHosts: strings.Join(*f.AdminAllowedHosts, ","),
		AdminAddr:         *f.AdminAddr, DNSAddr: *f.DNSAddr, HTTPAddr: *f.HTTPAddr,
		HTTPSAddr: *f.HTTPSAddr, P2PAddr: *f.P2PAddr,
		BootstrapPeers: strings.Join(*f.Bootstrap, ","), UpstreamDNS: strings.Join(*f.Upstream, ","),
		AdvertiseAddr:     strings.Join(*f.Advertise, ","),
		DNSRecursionAllow: strings.Join(acl, ","), SubnetBase: *f.SubnetBase,
		InitialIPIndex: strconv.Itoa(*f.InitialIPIndex),
		ProfileDomain:  *f.ProfileDomain, TokenLifetime: strconv.Itoa(token),
		BackupRetention: strconv.Itoa(max(*f.BackupRetention, 1)), BackupInterval: strconv.Itoa(*f.BackupIntervalHours),
		DNSQueryLog: strconv.FormatBool(*f.DNSQueryLog), DoTAddr: *f.DoTAddr,
		ReplicaSetSize: strconv.Itoa(replicas),
	}
	if *f.BackupRetention == 0 {
		m[BackupRetention] = strconv.Itoa(defaultBackups)
	}
	m[P2PTCP] = strconv.FormatBool(!*f.P2PNoTCP)
	m[Relay] = strconv.FormatBool(!*f.RelayOff)
	m[PortMap] = strconv.FormatBool(!*f.PortMapOff)
	m[RelayMaxConns] = strconv.Itoa(cmp.Or(*f.RelayMaxConns, transport.DefaultRelayMaxConns))
	switch {
	case *f.RelayMaxMbps < 0:
		m[RelayMaxMbps] = "0"
	case *f.RelayMaxMbps == 0:
		m[RelayMaxMbps] = strconv.Itoa(int(transport.DefaultRelayRate * 8 / 1e6))
	default:
		m[RelayMaxMbps] = strconv.Itoa(*f.RelayMaxMbps)
	}
	m[WSMaxClients] = strconv.Itoa(cmp.Or(*f.WSMaxClients, defaultWSClients))
	if *f.DNSCacheSize > 0 {
		m[DNSCacheSize] = strconv.Itoa(*f.DNSCacheSize)
	}
	if *f.EdgeMaxConns > 0 {
		m[EdgeMaxConns] = strconv.Itoa(*f.EdgeMaxConns)
	}
	if *f.EdgeConnsPerAddr > 0 {
		m[EdgeConnsPerAddr] = strconv.Itoa(*f.EdgeConnsPerAddr)
	}
	if *f.DNSTCPMaxConns > 0 {
		m[DNSTCPMaxConns] = strconv.Itoa(*f.DNSTCPMaxConns)
	}
	if *f.DNSTCPConnsPerAddr > 0 {
		m[DNSTCPConnsPerAddr] = strconv.Itoa(*f.DNSTCPConnsPerAddr)
	}
	if *f.DNSRecursionAllow != nil && len(*f.DNSRecursionAllow) == 0 {
		m[DNSRecursionAllow] = "none"
	}
	return m
}

// ApplySaved lays the settings saved in db over the fields, except those
// given (by "flag" or "env") in given, and returns every setting's value
// in force and its source ("flag", "env", "saved"; the absent ones are
// defaults). An empty profile domain becomes its default first. Saved
// values were validated when saved; one that no longer reads is skipped
// with warn (the default or the flag's value stays).
func ApplySaved(f Fields, given map[string]string, db *store.DB, warn func(msg string, args ...any)) (inForce, sources map[string]string, err error) {
	if *f.ProfileDomain == "" {
		*f.ProfileDomain = defaultProfileDomain
	}
	saved, err := LoadSaved(db)
	if err != nil {
		return nil, nil, fmt.Errorf("saved settings: %w", err)
	}
	src := map[string]string{}
	for k, v := range given {
		src[k] = v
	}
	for name, v := range saved {
		if s := src[name]; s == "flag" || s == "env" {
			continue
		}
		if err := f.Set(name, v); err != nil {
			warn("saved setting ignored", "setting", name, "err", err)
			continue
		}
		src[name] = "saved"
	}
	return f.InForce(), src, nil
}

// Int is the live applier (Deps.Apply) of a whole-number setting: the
// value was validated already; the parse only guards the type.
func Int(set func(int)) func(string) error {
	return func(v string) error {
		i, err := strconv.Atoi(v)
		if err != nil {
			return err
		}
		set(i)
		return nil
	}
}
