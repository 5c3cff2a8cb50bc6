package dns

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"time"

	"peerdns/dns/zone"
	"peerdns/internal/procs"
)

// DefaultAddr is where the node answers DNS unless told otherwise.
const DefaultAddr = "127.0.0.1:7753"

// DefaultUDPSize is the EDNS0 payload size we advertise and honour: the
// DNS Flag Day 2020 value, which avoids IP fragmentation.
const DefaultUDPSize = 1232

// Config configures a Server. Zero values take the defaults.
type Config struct {
	Addr            string           // host:port for UDP and TCP; default DefaultAddr
	Upstreams       []string         // ip:port or ip (port 53); empty: the nameservers of ResolvConf
	ResolvConf      string           // default /etc/resolv.conf
	UDPSockets      int              // SO_REUSEPORT sockets; default one per CPU
	UDPSize         uint16           // EDNS0 payload size; default DefaultUDPSize
	TTL             uint32           // TTL of internal and p2p answers; default zone.DefaultTTL
	UpstreamTimeout time.Duration    // per upstream attempt; default 1s
	FailureTTL      time.Duration    // how long "every upstream failed" is cached; default 5s
	CacheSize       int              // upstream cache entries; default 10000
	MaxSlow         int              // concurrent slow-path UDP queries; default 4096
	Now             func() time.Time // clock of the upstream cache and the rate limiter; default time.Now (tests inject one)

	// RecursionAllow lists the client networks that get recursion:
	// forwarding upstream and answers from the upstream cache. Everyone
	// gets answers from the node's own data (internal domains, local
	// records, p2p domains); others get REFUSED for names only upstream
	// knows. nil: DefaultRecursionAllow (loopback and private ranges);
	// empty: nobody. ParsePrefixes reads it from a flag or env value.
	RecursionAllow []netip.Prefix
	// RateLimit is how many UDP responses per second one client network
	// (/24, /56) outside RecursionAllow gets before responses are dropped
	// or slip out truncated; default DefaultRateLimit, negative: no limit.
	RateLimit int
	// OnP2PAnswer, when set, is called with a p2p domain's name (as the
	// view has it) after the server answered it: at most once per domain
	// a second, from one goroutine of the server's own, never on the
	// answer path (zone.Touches). The node uses it to make sure the
	// tunnel clients of the domain's subscribed services run.
	OnP2PAnswer func(domain string)
	// QueryLog starts the server with the query log and per-client
	// counters on (Server.SetQueryLog changes it live); default off.
	QueryLog bool
	// CookieSecret is the 16-byte secret of the server's DNS cookies
	// (RFC 9018; share it between servers of one anycast address); nil:
	// a random one made at start (cookies.go).
	CookieSecret []byte
	// CookieRotate is how often a random secret is replaced by a new
	// random one (the previous one keeps verifying until the next
	// rotation) [24h]; negative: never. A secret given in CookieSecret is
	// never rotated here: the servers that share it rotate it together,
	// by configuration.
	CookieRotate time.Duration
	// MaxStreamConns caps the open connections of each stream listener
	// (TCP, and DoT when served); a connection over the cap is closed at
	// once. Default DefaultMaxStreamConns, or a quarter of the process's
	// descriptor limit when that is less (TCP and DoT together then
	// leave half of them to the rest of the node). One client address
	// holds at most a share of it (internal/connshare), loopback aside.
	MaxStreamConns int
	// MaxStreamConnsPerAddr is one client address's share of
	// MaxStreamConns, at most MaxStreamConns; 0: connshare.Share (256, or
	// a quarter of the cap when less).
	MaxStreamConnsPerAddr int
	// StreamWriteTimeout is how long a TCP or DoT client may take none of
	// an answer before its connection is closed; default
	// DefaultStreamWriteTimeout.
	StreamWriteTimeout time.Duration
	// countLoopback counts loopback clients against their address's
	// share of MaxStreamConns (tests, whose clients are all on loopback).
	countLoopback bool
}

func (c *Config) defaults() {
	c.Upstreams = append([]string(nil), c.Upstreams...) // Validate rewrites entries; keep the caller's slice
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.ResolvConf == "" {
		c.ResolvConf = "/etc/resolv.conf"
	}
	if c.UDPSockets <= 0 {
		c.UDPSockets = runtime.NumCPU()
	}
	if !haveReusePort {
		c.UDPSockets = 1
	}
	if c.UDPSize < zone.MinUDPSize {
		c.UDPSize = DefaultUDPSize
	}
	if c.MaxSlow <= 0 {
		c.MaxSlow = 4096
	}
	if c.RecursionAllow == nil {
		c.RecursionAllow = DefaultRecursionAllow()
	}
	if c.RateLimit == 0 {
		c.RateLimit = DefaultRateLimit
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.CookieRotate == 0 {
		c.CookieRotate = DefaultCookieRotate
	}
	if c.MaxStreamConns <= 0 {
		c.MaxStreamConns = procs.ConnCap(DefaultMaxStreamConns, procs.OpenFileLimit())
	}
	if c.StreamWriteTimeout <= 0 {
		c.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
}

// DefaultCookieRotate is how often a random cookie secret is replaced.
const DefaultCookieRotate = 24 * time.Hour

// NormalizeUpstreams checks upstream servers (ip or ip:port each; host
// names cannot be resolved before DNS runs) and completes bare addresses
// with port 53.
func NormalizeUpstreams(list []string) ([]string, error) {
	out := make([]string, len(list))
	for i, u := range list {
		if ap, err := netip.ParseAddrPort(u); err == nil {
			out[i] = ap.String()
			continue
		}
		// A bare address means port 53.
		ip, err := netip.ParseAddr(strings.Trim(u, "[]"))
		if err != nil {
			return nil, fmt.Errorf("upstream %q: want ip or ip:port (host names cannot be resolved before DNS runs)", u)
		}
		out[i] = netip.AddrPortFrom(ip, 53).String()
	}
	return out, nil
}

// Validate checks the config after defaults (and completes bare
// upstream addresses with port 53).
func (c *Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("dns addr %q: %w", c.Addr, err)
	}
	ups, err := NormalizeUpstreams(c.Upstreams)
	if err != nil {
		return err
	}
	copy(c.Upstreams, ups)
	for _, p := range c.RecursionAllow {
		if !p.IsValid() {
			return fmt.Errorf("recursion ACL: invalid network %v", p)
		}
	}
	return nil
}
