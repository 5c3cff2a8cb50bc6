package transport

import "time"

// LinkStats are what a QUIC connection's loss recovery and congestion
// controller know of its path, as quic-go keeps them: counters since the
// connection started (a new connection to the same peer starts again at
// zero) and the present window and smoothed round trip. Packets lost are
// packets quic-go declared lost and sent again: drops on the way, at the
// receiving host's socket, or in the receiving quic-go's queue alike.
type LinkStats struct {
	PacketsSent, PacketsReceived, PacketsLost uint64
	CongestionWindow                          uint64 // bytes the sender may have in flight
	SmoothedRTT                               time.Duration
}

// LinkStatser is implemented by the Conns that run on QUIC. A stream
// path (TCP, relayed) has no such counters of its own: the kernel's TCP
// or the relay's connection carry its bytes.
type LinkStatser interface {
	LinkStats() LinkStats
}

var _ LinkStatser = (*quicConn)(nil)

// LinkStats reads quic-go's counters of the connection.
func (c *quicConn) LinkStats() LinkStats {
	s := c.qc.ConnectionStats()
	return LinkStats{
		PacketsSent: s.PacketsSent, PacketsReceived: s.PacketsReceived, PacketsLost: s.PacketsLost,
		CongestionWindow: s.CongestionWindow, SmoothedRTT: s.SmoothedRTT,
	}
}
