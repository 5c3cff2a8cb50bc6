package peer

import "peerdns/messages"

// mappedAddr is the external address the router maps our peer port to
// (Deps.PortMap), when the mapping holds and its address is public; ""
// otherwise. A mapping is the router's own word, asked from the default
// gateway only (transport/portmap), so unlike an observed address it
// needs no second witness.
func (a *Actor) mappedAddr() string {
	if a.d.PortMap == nil {
		return ""
	}
	s := a.d.PortMap()
	if s == nil || s.State != messages.PortMapMapped || !s.Advertised || !validAddr(s.External) {
		return ""
	}
	return s.External
}
