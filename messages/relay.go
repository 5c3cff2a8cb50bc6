package messages

// PathCounters are the counters of a node's TCP and relay paths (GET
// /api/diagnostics/invites, summary.paths).
type PathCounters struct {
	TCPAccepted     int64 `json:"tcpAccepted"`     // inbound TCP connections that completed TLS
	TCPDialed       int64 `json:"tcpDialed"`       // dials that ended on TCP
	QUICUpgrades    int64 `json:"quicUpgrades"`    // QUIC connections that came up after TCP won their dial (the peer moves to them)
	TCPRefused      int64 `json:"tcpRefused"`      // TCP connections refused at the pending-inbound cap
	TCPBadHandshake int64 `json:"tcpBadHandshake"` // closed: not TLS 1.3 with a valid peer certificate
	SendLosses      int64 `json:"sendLosses"`      // UDP datagrams the host refused to send (a firewall's output drop, a full conntrack table), counted as lost; the connections live on
	UDPGRO          bool  `json:"udpGro"`          // the QUIC socket reads datagrams the kernel merged (UDP_GRO; off on other systems or with PEERDNS_DISABLE_GRO)
	GROMerged       int64 `json:"groMerged"`       // merged datagrams read, each several QUIC packets

	RelayActive        int64 `json:"relayActive"`        // connections relayed through this node now
	RelayServed        int64 `json:"relayServed"`        // connections relayed through this node since start
	RelayBytes         int64 `json:"relayBytes"`         // bytes relayed
	RelaySlowed        int64 `json:"relaySlowed"`        // copies that waited for RELAY_MAX_MBPS
	RelayRefusedBusy   int64 `json:"relayRefusedBusy"`   // refused at RELAY_MAX_CONNS or the per-peer cap
	RelayRefusedWriter int64 `json:"relayRefusedWriter"` // refused: the requester is not a writer
	RelayRefusedOther  int64 `json:"relayRefusedOther"`  // refused: relaying off, target not connected, malformed
	RelayedIn          int64 `json:"relayedIn"`          // relayed connections this node accepted
	RelayedInBad       int64 `json:"relayedInBad"`       // ... that failed TLS or proved another key than announced
	RelayedInRefused   int64 `json:"relayedInRefused"`   // relayed connections to this node refused at the pending-inbound cap (tcpRefused counts TCP's)
	RelayedOut         int64 `json:"relayedOut"`         // relayed connections this node dialed
	RelayedOutFailed   int64 `json:"relayedOutFailed"`   // ... that failed
}
