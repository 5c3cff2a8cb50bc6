package portmap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackpal/gateway"
	natpmp "github.com/jackpal/go-nat-pmp"

	"peerdns/messages"
)

// Config is one Mapper's setup. Zero values take the defaults in
// brackets.
type Config struct {
	// Port is the node's peer port: the only internal port ever mapped.
	Port int
	// TCP: the node also listens on TCP on Port; map it too.
	TCP bool
	// Local is the address the peer socket is bound to. A loopback
	// address turns mapping off; a specific address is the requests'
	// source (the router maps to where a request comes from); invalid
	// or unspecified: the kernel picks, as for the node's own packets.
	Local netip.Addr
	// Lifetime asked for each mapping [2h].
	Lifetime time.Duration
	// Timeout bounds one request, retransmissions included [2s].
	Timeout time.Duration
	// Tries is how many quick tries are made before going quiet [3].
	Tries int
	// Retry is the quiet pause between tries once the quick ones failed
	// [15m].
	Retry time.Duration
	// Gateway finds the router to ask [the default route's gateway].
	Gateway func() (netip.Addr, error)
	Log     *slog.Logger
	Now     func() time.Time
}

func (c *Config) defaults() {
	if c.Lifetime <= 0 {
		c.Lifetime = 2 * time.Hour
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Second
	}
	if c.Tries <= 0 {
		c.Tries = 3
	}
	if c.Retry <= 0 {
		c.Retry = 15 * time.Minute
	}
	if c.Gateway == nil {
		c.Gateway = defaultGateway
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// minRenew keeps a router that grants short lifetimes from making us ask
// often: renewals come at half the lifetime, but not sooner than this
// unless that would come after three quarters of it.
const minRenew = 15 * time.Second

// renewAfter is when to renew a mapping granted for life.
func renewAfter(life time.Duration) time.Duration {
	return max(life/2, min(minRenew, life*3/4))
}

// defaultGateway is the default route's IPv4 gateway (NAT-PMP is IPv4).
func defaultGateway() (netip.Addr, error) {
	ip, err := gateway.DiscoverGateway()
	if err != nil {
		return netip.Addr{}, err
	}
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}, fmt.Errorf("gateway %v is not an address", ip)
	}
	return a.Unmap(), nil
}

// Mapper keeps the peer port mapped on the router while it runs.
type Mapper struct {
	cfg    Config
	cur    atomic.Pointer[messages.PortMapping]
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Off is a Mapper that maps nothing and reports why (PORT_MAP=false).
func Off(why string) *Mapper {
	m := &Mapper{done: make(chan struct{})}
	close(m.done)
	m.cur.Store(&messages.PortMapping{State: messages.PortMapOff, Detail: why})
	return m
}

// Start begins mapping cfg.Port in the background (see the package doc).
// A loopback cfg.Local gives a Mapper that is off.
func Start(cfg Config) *Mapper {
	if cfg.Local.IsValid() && cfg.Local.IsLoopback() {
		return Off("the peer address is bound to loopback")
	}
	if cfg.Port <= 0 || cfg.Port > 65535 {
		return Off("no peer port to map")
	}
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mapper{cfg: cfg, cancel: cancel, done: make(chan struct{})}
	m.cur.Store(&messages.PortMapping{State: messages.PortMapSearching})
	go m.run(ctx)
	return m
}

// Status is what the Mapper holds now (never nil, never modified).
func (m *Mapper) Status() *messages.PortMapping { return m.cur.Load() }

// Close stops renewing and deletes the mappings the router holds for us.
// It waits for a request in flight (at most Config.Timeout) and the
// deletion (at most Config.Timeout per protocol).
func (m *Mapper) Close() {
	m.once.Do(func() {
		if m.cancel != nil {
			m.cancel()
		}
	})
	<-m.done
}

// held is one live mapping.
type held struct {
	proto   string // messages.PortMapNATPMP or PortMapUPnP
	igd     igd    // the gateway's IGD service (UPnP only)
	gw      netip.Addr
	ext     netip.Addr
	port    uint16 // external UDP port
	tcpPort uint16 // external TCP port, 0: none
	// tcpDel is the external port of the TCP mapping the router may
	// still hold for us, deleted on Close: tcpPort, or the one granted
	// before when a renewal's TCP request failed (that mapping lives
	// until its lifetime ends); 0: none.
	tcpDel  uint16
	expires time.Time
	granted time.Duration
}

func (m *Mapper) run(ctx context.Context) {
	defer close(m.done)
	var (
		h        *held
		failures int
		quiet    bool // the give-up line was logged
	)
	defer func() {
		if h != nil {
			m.unmap(h)
		}
	}()
	for {
		next, err := m.mapOnce(ctx, h)
		now := m.cfg.Now()
		var wait time.Duration
		switch {
		case err == nil:
			if h == nil || h.port != next.port || h.ext != next.ext {
				m.cfg.Log.Info("router maps the peer port", "protocol", next.proto, "gateway", next.gw,
					"external", netip.AddrPortFrom(next.ext, next.port), "tcp", next.tcpPort, "lifetime", next.granted)
			} else {
				m.cfg.Log.Debug("port mapping renewed", "external", netip.AddrPortFrom(next.ext, next.port), "lifetime", next.granted)
			}
			h, failures, quiet = next, 0, false
			m.publish(h, "")
			wait = renewAfter(h.granted)
		case h != nil && now.Before(h.expires) && !errors.Is(err, errMoved):
			// Renewal failed but the mapping still lives: try again
			// within what is left, a few times.
			failures++
			m.cfg.Log.Debug("port mapping renewal failed", "err", err, "left", h.expires.Sub(now))
			m.publish(h, err.Error())
			wait = max(min(h.expires.Sub(now)/2, time.Second<<min(failures, 12)), time.Second)
		default:
			switch {
			case h != nil && errors.Is(err, errMoved):
				// Another network: the old router's mapping leads
				// nowhere now. Free it if that router is still there.
				m.cfg.Log.Info("the gateway changed and its router maps nothing yet; the old mapping is given up", "err", err)
				m.unmap(h)
				h, failures = nil, 0
			case h != nil:
				m.cfg.Log.Warn("router dropped the peer port mapping", "err", err)
				h, failures = nil, 0
			}
			failures++
			if failures < m.cfg.Tries {
				m.publishState(messages.PortMapSearching, err.Error())
				wait = time.Duration(failures) * 500 * time.Millisecond
				break
			}
			if !quiet {
				m.cfg.Log.Info("no router mapped the peer port (NAT-PMP, UPnP IGD); asking again every "+m.cfg.Retry.String(), "err", err)
				quiet = true
			} else {
				m.cfg.Log.Debug("port mapping still unavailable", "err", err)
			}
			m.publishState(messages.PortMapUnavailable, err.Error())
			wait = m.cfg.Retry
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// client is a NAT-PMP client for gw from our own address.
func (m *Mapper) client(gw netip.Addr, timeout time.Duration) *natpmp.Client {
	if l := m.cfg.Local; l.IsValid() && !l.IsUnspecified() && l.Is4() {
		return natpmp.NewClientWithLocalAndTimeout(gw.AsSlice(), l.AsSlice(), timeout)
	}
	return natpmp.NewClientWithTimeout(gw.AsSlice(), timeout)
}

// errMoved marks a failure to map on a gateway other than the one that
// holds the mapping: the node moved to another network, where the old
// mapping does not lead.
var errMoved = errors.New("the gateway changed")

// mapOnce asks the gateway for (or to renew) our mappings: a renewal by
// the protocol that made them, a new mapping by NAT-PMP first (one
// datagram, refused at once where nothing listens) and UPnP IGD after.
func (m *Mapper) mapOnce(ctx context.Context, prev *held) (*held, error) {
	gw, err := m.cfg.Gateway()
	if err != nil {
		return nil, fmt.Errorf("no default gateway: %w", err)
	}
	if !gw.Is4() || gw.IsUnspecified() || gw.IsMulticast() {
		return nil, fmt.Errorf("gateway %v cannot be asked (NAT-PMP and UPnP IGD are IPv4 unicast)", gw)
	}
	var h *held
	switch {
	case prev != nil && prev.gw == gw && prev.proto == messages.PortMapUPnP:
		h, err = m.mapUPnP(ctx, gw, prev)
	case prev != nil && prev.gw == gw:
		h, err = m.mapPMP(ctx, gw, prev)
	default:
		var perr, uerr error
		switch h, perr = m.mapPMP(ctx, gw, nil); {
		case perr == nil:
		case gw.IsLoopback() || ctx.Err() != nil:
			// No router sits on loopback, and an SSDP search would go
			// out on the host's network; once stopping, nothing more
			// is asked.
			err = fmt.Errorf("NAT-PMP: %w", perr)
		default:
			if h, uerr = m.mapUPnP(ctx, gw, nil); uerr != nil {
				err = fmt.Errorf("NAT-PMP: %v; UPnP IGD: %v", perr, uerr)
			}
		}
	}
	if err != nil {
		if prev != nil && prev.gw != gw {
			return nil, fmt.Errorf("%w from %v to %v: %w", errMoved, prev.gw, gw, err)
		}
		return nil, err
	}
	if prev != nil && prev.gw != gw {
		m.unmap(prev) // moved to another network: free the old router's mapping
	}
	return h, nil
}

// mapPMP asks the gateway for (or to renew) our mappings with NAT-PMP.
// Once ctx is done it sends no further request: the TCP mapping is
// skipped, so the UDP one made is returned for deletion.
func (m *Mapper) mapPMP(ctx context.Context, gw netip.Addr, prev *held) (*held, error) {
	c := m.client(gw, m.cfg.Timeout)
	ea, err := c.GetExternalAddress()
	if err != nil {
		return nil, fmt.Errorf("gateway %v: external address: %w", gw, err)
	}
	ext := netip.AddrFrom4(ea.ExternalIPAddress)
	if ext.IsUnspecified() || ext.IsMulticast() || ext.IsLoopback() {
		return nil, fmt.Errorf("gateway %v reports an unusable external address %v", gw, ext)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	want := m.cfg.Port // the first request suggests the same port outside
	if prev != nil && prev.gw == gw {
		want = int(prev.port)
	}
	life := int(m.cfg.Lifetime / time.Second)
	r, err := c.AddPortMapping("udp", m.cfg.Port, want, life)
	if err := checkGrant(r, err, m.cfg.Port); err != nil {
		return nil, fmt.Errorf("gateway %v: map udp %d: %w", gw, m.cfg.Port, err)
	}
	// A router may shorten the lifetime asked, not lengthen it (RFC 6886
	// §3.3): one that says more is taken at what was asked, so the
	// mapping is renewed (and a router that lost it is asked again).
	asked := time.Duration(life) * time.Second
	h := &held{proto: messages.PortMapNATPMP, gw: gw, ext: ext, port: r.MappedExternalPort,
		granted: min(asked, time.Duration(r.PortMappingLifetimeInSeconds)*time.Second)}
	if m.cfg.TCP && ctx.Err() == nil {
		// The same external port as UDP, so the one advertised address
		// serves both paths; the router may give another.
		rt, err := c.AddPortMapping("tcp", m.cfg.Port, int(h.port), life)
		if err := checkGrant(rt, err, m.cfg.Port); err != nil {
			m.cfg.Log.Debug("router did not map the TCP peer port", "gateway", gw, "err", err)
		} else {
			h.tcpPort = rt.MappedExternalPort
			h.granted = min(h.granted, time.Duration(rt.PortMappingLifetimeInSeconds)*time.Second)
		}
	}
	h.tcpDel = tcpToDelete(h, prev)
	h.expires = m.cfg.Now().Add(h.granted)
	return h, nil
}

// checkGrant checks a mapping answer: ours (the internal port we asked
// for), with an external port and a lifetime.
func checkGrant(r *natpmp.AddPortMappingResult, err error, port int) error {
	switch {
	case err != nil:
		return err
	case int(r.InternalPort) != port:
		return fmt.Errorf("answer names internal port %d, not ours", r.InternalPort)
	case r.MappedExternalPort == 0:
		return errors.New("answer maps no external port")
	case r.PortMappingLifetimeInSeconds == 0:
		return errors.New("answer grants no lifetime")
	}
	return nil
}

// tcpToDelete is h's tcpDel: its TCP mapping, or else the one prev held
// on the same gateway.
func tcpToDelete(h, prev *held) uint16 {
	switch {
	case h.tcpPort != 0:
		return h.tcpPort
	case prev != nil && prev.gw == h.gw:
		return prev.tcpDel
	}
	return 0
}

// unmap asks the router to delete our mappings (NAT-PMP: lifetime 0,
// RFC 6886 §3.4; UPnP: DeletePortMapping), one short try each: a router
// that is gone drops them anyway when their lifetime ends.
func (m *Mapper) unmap(h *held) {
	defer func() {
		m.cfg.Log.Info("port mapping deleted", "protocol", h.proto, "gateway", h.gw, "external", netip.AddrPortFrom(h.ext, h.port))
		m.publishState(messages.PortMapOff, "stopped")
	}()
	if h.proto == messages.PortMapUPnP {
		m.unmapUPnP(h)
		return
	}
	c := m.client(h.gw, m.cfg.Timeout)
	if _, err := c.AddPortMapping("udp", m.cfg.Port, 0, 0); err != nil {
		m.cfg.Log.Debug("deleting the udp port mapping failed", "err", err)
	}
	if h.tcpDel != 0 {
		if _, err := c.AddPortMapping("tcp", m.cfg.Port, 0, 0); err != nil {
			m.cfg.Log.Debug("deleting the tcp port mapping failed", "err", err)
		}
	}
}

func (m *Mapper) publish(h *held, detail string) {
	s := &messages.PortMapping{
		State: messages.PortMapMapped, Protocol: h.proto, Gateway: h.gw.String(),
		External: netip.AddrPortFrom(h.ext, h.port).String(), ExpiresAt: h.expires.UnixMilli(),
		Advertised: Public(h.ext), Detail: detail,
	}
	if h.tcpPort != 0 {
		s.ExternalTCP = net.JoinHostPort(h.ext.String(), strconv.Itoa(int(h.tcpPort)))
	}
	m.cur.Store(s)
}

func (m *Mapper) publishState(state, detail string) {
	m.cur.Store(&messages.PortMapping{State: state, Detail: detail})
}

// sharedSpace is RFC 6598's carrier-grade NAT range.
var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")

// Public reports whether an external address a router reports is worth
// advertising: not private (RFC 1918), shared (RFC 6598: a carrier's NAT
// sits beyond the router), loopback, link-local or unspecified. Behind
// such an address the router is itself behind a NAT, so its mapping
// does not reach the outside. Documentation ranges count as public (the
// NAT lab lives in them).
func Public(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsValid() && !a.IsUnspecified() && !a.IsLoopback() && !a.IsPrivate() &&
		!a.IsLinkLocalUnicast() && !a.IsMulticast() && !sharedSpace.Contains(a)
}

// Advertise is the address to advertise from status s ("" when none).
func Advertise(s *messages.PortMapping) string {
	if s == nil || s.State != messages.PortMapMapped || !s.Advertised {
		return ""
	}
	return s.External
}
