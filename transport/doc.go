// Package transport carries the peer protocol between nodes.
//
// It owns: the Endpoint/Conn seam (transport.go), its QUIC implementation
// (quic.go: one quic.Transport on one UDP socket for both listening and
// dialing, TLS 1.3 with Ed25519 self-signed certificates checked against
// the expected peer id, ALPN "peerdns/1", keep-alive, datagrams), the
// control-stream framing (frame.go: 4-byte big-endian length + CBOR
// envelope, at most 1 MiB, a frame once begun finished within
// DefaultFrameTimeout plus its size at 64 kbit/s, why there), the redialer with capped jittered exponential
// backoff (dialer.go), invites (invite.go), the cap on inbound
// connections not admitted yet (pending.go), the socket wrapper that
// turns a send the host refuses (EPERM from a firewall, ENOBUFS, a route
// gone for a moment) into a lost packet instead of a dead connection
// (sendloss.go; its reads go through internal/udpgro, which hands quic-go
// the datagrams the kernel merged, UDP_GRO, packet by packet), the send order of a connection's streams (priority.go:
// an answer goes out whole, streams that wait move up), and the stream
// paths: the same Conn over TLS 1.3 + yamux
// on a TCP connection (tcp.go, on the QUIC port number) or on a stream
// relayed through a peer (relay.go), both in streamconn.go, gathered with
// QUIC in MultiEndpoint.
//
// It must never: know about the ledger or actors, or decide who may join.
// It authenticates keys; the peers supervisor (actors/peer) authorises them.
package transport
