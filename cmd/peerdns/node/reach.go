package node

import (
	"net"
	"net/netip"
	"time"

	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/portmap"
)

// SetSetting sets one setting's Config field from its text value, as a
// saved value would (cmd/peerdns uses it for settings read from the
// environment).
func SetSetting(c *Config, name, v string) error { return c.settingFields().Set(name, v) }

// pathOptions are the endpoint's TCP and relay options from the config.
func (n *Node) pathOptions() transport.Options {
	o := transport.Options{NoTCP: n.cfg.P2PNoTCP}
	o.Relay.Off = n.cfg.RelayOff
	o.Relay.MaxConns = n.cfg.RelayMaxConns
	o.Relay.TamperAfter = relayTamperAfter()
	switch {
	case n.cfg.RelayMaxMbps < 0:
		o.Relay.Rate = -1
	case n.cfg.RelayMaxMbps > 0:
		o.Relay.Rate = float64(n.cfg.RelayMaxMbps) * 1e6 / 8
	}
	return o
}

// wireRelay lets peers use this node as a relay: only writers of the
// network (the ledger says), towards peers with an established session
// (the mesh); relayed streams arrive on their own stream kind.
func (n *Node) wireRelay(ep *transport.MultiEndpoint) {
	root := n.root.System.Root
	ep.SetRelay(func(id string) bool {
		res, err := root.RequestFuture(n.ledger, &messages.IsWriter{ID: id}, 2*time.Second).Result()
		r, ok := res.(*messages.IsWriterReply)
		return err == nil && ok && r.OK
	}, n.mesh.Conn)
	n.mux.For(transport.StreamRelay).HandleStreams(ep.ServeRelayStream)
}

// startPortMap asks the router to map the peer port (transport/portmap)
// unless PORT_MAP=false; a loopback peer address gives a mapper that is
// off.
func (n *Node) startPortMap(ep *transport.MultiEndpoint) *portmap.Mapper {
	if n.cfg.PortMapOff {
		return portmap.Off("PORT_MAP=false")
	}
	ua, _ := ep.Addr().(*net.UDPAddr)
	if ua == nil {
		return portmap.Off("the peer endpoint has no UDP address")
	}
	local, _ := netip.AddrFromSlice(ua.IP)
	return portmap.Start(portmap.Config{
		Port: ua.Port, TCP: ep.TCPAddr() != nil, Local: local.Unmap(), Log: n.logs["core"],
		Lifetime: portMapLifetime(),
	})
}
