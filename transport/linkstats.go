package transport

import "peerdns/messages"

// LinkStatser is implemented by the Conns that run on QUIC: LinkStats is
// what the connection's loss recovery and congestion controller know of
// its path, as quic-go keeps them (messages.QUICLink). Its counters run
// from the connection's start: a new connection to the same peer starts
// again at zero. Packets lost are packets quic-go declared lost and sent
// again: drops on the way, at the receiving host's socket, or in the
// receiving quic-go's queue alike. A stream path (TCP, relayed) has no
// such counters of its own: the kernel's TCP or the relay's connection
// carry its bytes.
type LinkStatser interface {
	LinkStats() messages.QUICLink
}

var _ LinkStatser = (*quicConn)(nil)

// LinkStats reads quic-go's counters of the connection.
func (c *quicConn) LinkStats() messages.QUICLink {
	s := c.qc.ConnectionStats()
	return messages.QUICLink{
		PacketsSent: s.PacketsSent, PacketsReceived: s.PacketsReceived, PacketsLost: s.PacketsLost,
		CongestionWindow: s.CongestionWindow, SmoothedRTTMs: float64(s.SmoothedRTT.Microseconds()) / 1000,
	}
}
