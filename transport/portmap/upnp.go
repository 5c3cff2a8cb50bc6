package portmap

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"net/url"
	"time"

	"github.com/huin/goupnp/dcps/internetgateway2"
	"github.com/huin/goupnp/httpu"
	"github.com/huin/goupnp/soap"
	"github.com/huin/goupnp/ssdp"

	"peerdns/messages"
)

// UPnP IGD, for routers without NAT-PMP: SSDP search, then SOAP over
// HTTP to the WANIPConnection service (v2, else v1), all through
// github.com/huin/goupnp (which encodes and decodes SSDP, the device
// description and SOAP). Only a device whose description URL is on the
// gateway's address is used: anyone on the LAN may answer a search, but
// every request that follows goes to the gateway alone.

// igd is what both WANIPConnection versions offer.
type igd interface {
	GetExternalIPAddressCtx(ctx context.Context) (string, error)
	AddPortMappingCtx(ctx context.Context, remoteHost string, extPort uint16, proto string, intPort uint16,
		intClient string, enabled bool, desc string, lease uint32) error
	DeletePortMappingCtx(ctx context.Context, remoteHost string, extPort uint16, proto string) error
}

// upnpSearchWait bounds one SSDP search (the routers' answers are spread
// over its MX seconds).
const upnpSearchWait = 2 * time.Second

// upnpDesc names our mappings in the router's table.
const upnpDesc = "peerdns peer port"

// upnpConflict is UPnP's ConflictInMappingEntry: the external port asked
// for is mapped already, to another internal client or port (another
// node behind the same router on the same peer port).
const upnpConflict = 718

// upnpOtherPorts is how many random external ports a router without
// AddAnyPortMapping (IGDv1) is asked for once the peer port is taken.
const upnpOtherPorts = 8

// upnpErrorCode is the UPnP error code of a SOAP fault (0: none).
func upnpErrorCode(err error) int {
	var fault *soap.SOAPFaultError
	if errors.As(err, &fault) {
		return fault.Detail.UPnPError.Errorcode
	}
	return 0
}

// findIGD searches the LAN for a gateway device and returns a client for
// its WAN IP connection service, when its description is at gw.
func findIGD(ctx context.Context, gw netip.Addr) (igd, error) {
	hc, err := httpu.NewHTTPUClient()
	if err != nil {
		return nil, err
	}
	defer hc.Close()
	sctx, cancel := context.WithTimeout(ctx, upnpSearchWait)
	defer cancel()
	resps, err := ssdp.RawSearch(sctx, hc, ssdp.UPNPRootDevice, 2)
	if err != nil {
		return nil, fmt.Errorf("ssdp search: %w", err)
	}
	var locs []*url.URL
	for _, r := range resps {
		loc, err := r.Location()
		if err != nil {
			continue
		}
		if h, err := netip.ParseAddr(loc.Hostname()); err == nil && h.Unmap() == gw {
			locs = append(locs, loc)
		}
	}
	if len(locs) == 0 {
		return nil, fmt.Errorf("no UPnP device at the gateway %v answered (%d answers from elsewhere)", gw, len(resps))
	}
	for _, loc := range locs {
		if cs, err := internetgateway2.NewWANIPConnection2ClientsByURLCtx(ctx, loc); err == nil && len(cs) > 0 {
			return cs[0], nil
		}
		if cs, err := internetgateway2.NewWANIPConnection1ClientsByURLCtx(ctx, loc); err == nil && len(cs) > 0 {
			return cs[0], nil
		}
	}
	return nil, fmt.Errorf("the gateway %v offers no WANIPConnection service", gw)
}

// localTowards is the source address the kernel uses towards gw (a
// connected UDP socket sends nothing).
func localTowards(gw netip.Addr) (netip.Addr, error) {
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(gw, 1900)))
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

// mapUPnP asks the gateway's IGD for (or to renew) our mappings.
func (m *Mapper) mapUPnP(ctx context.Context, gw netip.Addr, prev *held) (*held, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout+upnpSearchWait)
	defer cancel()
	var dev igd
	if prev != nil && prev.igd != nil && prev.gw == gw {
		dev = prev.igd
	} else {
		var err error
		if dev, err = findIGD(ctx, gw); err != nil {
			return nil, err
		}
	}
	local := m.cfg.Local
	if !local.IsValid() || local.IsUnspecified() || !local.Is4() {
		var err error
		if local, err = localTowards(gw); err != nil {
			return nil, fmt.Errorf("our address towards %v: %w", gw, err)
		}
	}
	es, err := dev.GetExternalIPAddressCtx(ctx)
	if err != nil {
		return nil, fmt.Errorf("external address: %w", err)
	}
	ext, err := netip.ParseAddr(es)
	if err != nil || !ext.Unmap().Is4() || ext.IsUnspecified() || ext.IsMulticast() || ext.IsLoopback() {
		return nil, fmt.Errorf("gateway %v reports an unusable external address %q", gw, es)
	}
	want := uint16(m.cfg.Port)
	if prev != nil && prev.gw == gw {
		want = prev.port
	}
	life := uint32(m.cfg.Lifetime / time.Second)
	add := func(proto string, ext uint16) error {
		err := dev.AddPortMappingCtx(ctx, "", ext, proto, uint16(m.cfg.Port), local.String(), true, upnpDesc, life)
		if upnpErrorCode(err) == 725 {
			// OnlyPermanentLeasesSupported (IGDv1): a lease of 0; it is
			// deleted on Close and renewed like the others.
			err = dev.AddPortMappingCtx(ctx, "", ext, proto, uint16(m.cfg.Port), local.String(), true, upnpDesc, 0)
		}
		return err
	}
	err = add("UDP", want)
	if upnpErrorCode(err) == upnpConflict {
		// Another mapping holds the port: let the router pick one
		// (IGDv2), or else try a few at random, as miniupnpc's and
		// Tailscale's clients do; NAT-PMP routers pick one themselves.
		var got uint16
		if v2, ok := dev.(*internetgateway2.WANIPConnection2); ok {
			var aerr error
			if got, aerr = v2.AddAnyPortMappingCtx(ctx, "", want, "UDP", uint16(m.cfg.Port), local.String(), true, upnpDesc, life); aerr != nil {
				got = 0
			}
		}
		for i := 0; got == 0 && upnpErrorCode(err) == upnpConflict && i < upnpOtherPorts; i++ {
			p := uint16(1024 + rand.IntN(65536-1024))
			if err = add("UDP", p); err == nil {
				got = p
			}
		}
		if got != 0 {
			want, err = got, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("gateway %v: map udp %d: %w", gw, m.cfg.Port, err)
	}
	h := &held{proto: messages.PortMapUPnP, gw: gw, ext: ext.Unmap(), port: want, igd: dev, granted: m.cfg.Lifetime}
	if m.cfg.TCP {
		if err := add("TCP", want); err != nil {
			m.cfg.Log.Debug("router did not map the TCP peer port", "gateway", gw, "err", err)
		} else {
			h.tcpPort = want
		}
	}
	h.tcpDel = tcpToDelete(h, prev)
	h.expires = m.cfg.Now().Add(h.granted)
	return h, nil
}

// unmapUPnP deletes our mappings from the gateway's IGD.
func (m *Mapper) unmapUPnP(h *held) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Timeout)
	defer cancel()
	if err := h.igd.DeletePortMappingCtx(ctx, "", h.port, "UDP"); err != nil {
		m.cfg.Log.Debug("deleting the udp port mapping failed", "err", err)
	}
	if h.tcpDel != 0 {
		if err := h.igd.DeletePortMappingCtx(ctx, "", h.tcpDel, "TCP"); err != nil {
			m.cfg.Log.Debug("deleting the tcp port mapping failed", "err", err)
		}
	}
}
