package transport

// Mesh is what the tunnel layer needs from the peer network: the open
// connection to a peer, which peers announce a tunnel id, and a way to
// announce this node's own ids. The peers supervisor (actors/peer)
// implements it with snapshots, so the tunnel data path never waits on
// an actor.
type Mesh interface {
	// Conn is the established connection to peerID, if there is one.
	Conn(peerID string) (Conn, bool)
	// Providers lists the connected peers that announce tunnel id (a
	// 64-hex announced id), in a stable order.
	Providers(id string) []string
	// Announce replaces the set of tunnel ids this node serves; connected
	// peers are told now and peers that connect later on connect.
	Announce(ids []string)
	// HandleStreams sets the function that gets every stream a peer opens
	// on an established connection; it runs in its own goroutine per
	// stream and owns (must close) the stream.
	HandleStreams(h func(c Conn, s Stream))
	// HandleDatagrams sets the function that gets every datagram a peer
	// sends on an established connection. It runs on the connection's
	// receive loop, one datagram after another, so it must not block; b
	// is the caller's to keep. Datagrams that arrive with no handler set
	// are dropped.
	HandleDatagrams(h func(c Conn, b []byte))
}
