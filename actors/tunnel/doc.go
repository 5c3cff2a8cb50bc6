// Package tunnel is the tunnels actor family: a supervisor (Actor, built
// by Props) with one actor per tunnel server and one per tunnel client,
// TCP (one stream per connection) or UDP (QUIC datagrams per flow).
//
// # What it owns
//
// The supervisor owns the configured servers and clients (persisted in
// node.db as JSON under "tunnel:server:<id>" and "tunnel:client:<id>",
// started again when it starts), the dispatch table of inbound streams
// (announced id → running server, an atomic copy-on-write map, so a
// stream costs no actor round trip), and what this node announces
// (transport.Mesh.Announce, called with the ids of the running servers
// whenever that set changes). It answers the admin requests of
// messages/tunnel.go, always with a reply whose Err wraps ErrBadTunnel
// (validation: nothing is created), ErrUnknownTunnel or
// ErrDomainNotOwned. Crashed children are restarted with backoff. A new
// server's name is a label of at most 128 bytes of printable text.
//
// A server actor owns one server's handle (target host:port, key, live
// connections) and the claim of its domain (messages.AddDomain to the
// ledger with the server's URL at each start, keeping the ssl flag
// add-domain gave the claim; answered back into Receive). A server
// listens on nothing: peers reach it through the stream dispatch. A
// client actor owns one listener on the domain's local IP and port, its
// connections and the lookup of its server. A domain's port has at most
// one TCP and one UDP client. Counters (connections
// open/total, bytes in/out, last error) are atomics in the listing.
//
// It must never: block Receive on the network or the ledger, decide who
// is a peer of the network (actors/peer authorises connections), or keep
// a connection alive after its server or client stopped.
//
// # Keys
//
// A server's key comes from a seed (the tunnel-create "key"; without one
// 32 random bytes, hex, persisted as the seed), so the same seed gives
// the same hs:// URL on every run and machine:
//
//   - non-secure: priv = ed25519.NewKeyFromSeed(SHA-256("peerdns tunnel
//     key v1\x00" + seed)); URL = "hs://" + hex(pub); announced id =
//     hex(pub). Whoever knows the URL may connect.
//   - secure: secret = SHA-256("peerdns tunnel secret v1\x00" + seed);
//     URL = "hs://" + hex(secret); announced id = hex(SHA-256("peerdns
//     tunnel id v1\x00" + secret)). Peers that relay announcements or
//     look ids up never see the secret; a client must prove it (below).
//     A secure server cannot claim a domain: the claim's hash would
//     publish the secret to every peer. For the same reason a service
//     (services.go: its key is written into the claim) cannot have a
//     key known here to be a secret, i.e. the URL of a secure server on
//     this node or of one a peer announces (its secure id): the create
//     is refused with ErrBadTunnel. A secret of a server this node
//     cannot see is taken for a public key (below): give services only
//     non-secure servers' URLs.
//
// A client is given only the URL and cannot tell a public key from a
// secret, so it derives both candidates: plain = the 64 hex, secure =
// hex(SHA-256("peerdns tunnel id v1\x00" + bytes of the 64 hex)). It
// tries, in order: a server on this node (dialed directly, no stream)
// that is non-secure with the plain id or secure with the secure id (a
// secure server's announced id, which every peer sees, does not reach
// it here either), the providers of the plain id (no proof), then
// the providers of the secure id (with proof); a server on this node
// whose target cannot be dialed is passed over as a provider whose
// target refuses is (a peer may serve the same seed). The plain id is
// only sent to peers that announce it, which know it already.
//
// # Stream handshake
//
// Each tunnel connection is one stream on the peer connection, of kind
// transport.StreamTunnel (its first byte, written and read by
// transport.Mux in the node; plugin peer calls share the connection with
// kind StreamPlugin). After that byte, frames are
// a 4-byte big-endian length and strict CBOR (messages' codec), at most
// 1 KiB:
//
//	client → server  TunnelOpen{ID: announced id, Proof}
//	server → client  TunnelOpenReply{Err, Proof}    ("" = accepted)
//	then raw bytes both ways, until each side's FIN
//
// The server proves it holds the tunnel's key too: an accepting reply
// carries Proof = Ed25519 signature with the tunnel's private key
// (non-secure; the id is its public key) or HMAC-SHA256(key = secret)
// (secure), over conn.ExportKeyingMaterial("peerdns tunnel server proof
// v1", []byte(id), 32). Announcements are not authenticated (any peer
// can announce an id it saw in another's announcement or in a claim),
// so a client that gets an accepting reply without a valid proof ends
// that stream and tries the next provider: an impostor that sorts first
// among the providers costs a round trip (one that never answers, the
// handshake timeout), never the traffic, and only until a provider
// proved the id: the providers that proved it are tried first. A client
// asks it once per peer and tunnel: a later open to a peer that proved
// the id says TunnelOpen.Proven, and the reply carries none (the peer id
// is the key of the session the proof was bound to).
//
// Proof (secure ids only) = HMAC-SHA256(key = secret, msg =
// conn.ExportKeyingMaterial("peerdns tunnel proof v1", []byte(id), 32)):
// bound to that one QUIC connection's TLS session, so a peer that sees it
// cannot replay it on another connection. The server compares with
// hmac.Equal. The server refuses with an Err and closes the stream —
// "unknown tunnel", "proof refused" (missing or wrong), "too many
// streams" (the peer has Deps.MaxStreamsPerPeer streams open, or the
// tunnel has Deps.MaxStreamsPerTunnel connections open, from all peers
// and this node's own clients together: one busy tunnel cannot take
// every place of the node, as nginx's limit_conn per server; QUIC's own
// limit of concurrent incoming streams per connection applies below
// them; a client on the server's node is refused at the tunnel cap too,
// its connection reset),
// "target unreachable" (the TCP dial failed). A stream whose TunnelOpen
// does not arrive within Deps.HandshakeTimeout, or does not decode, is
// reset without an answer. Refusals are logged to the tunnel channel
// (at most 20 lines a second) and counted in Counters.RefusedStreams and
// the server's lastError.
//
// A TCP client carries at most Deps.MaxConnsPerClient (4096) local
// connections at once: a further one is reset as soon as it is accepted
// (counted in Counters.RefusedConns and the client's lastError, logged
// at most 20 lines a second), so a local program that opens connections
// without end costs no goroutine, stream or wait for each, as a server
// at nginx's worker_connections stops taking more. An accept that fails
// for want of descriptors, buffers or memory (EMFILE, ENFILE, ENOBUFS,
// ENOMEM) is tried again after a pause (5 ms doubling to 1 s, as
// net/http's Server), the listener and the connections queued on it
// kept; a listener that fails otherwise is bound again.
//
// # Data path
//
// Each direction is copied with a pooled 68 KiB buffer (copyBufSize);
// the end of data on one side is passed on as a half-close (TCP
// CloseWrite, QUIC FIN) and the other direction keeps flowing; a read
// error in either direction resets both sides at once (transport.Stream's
// CloseWrite and Abort; the in-memory transport half-closes as QUIC
// does), and so does the close of the stream's peer connection (both
// copies may wait on the local side then: a program that reads nothing
// and says nothing), a write error once the other direction has ended
// too, so an answer a backend sent before it reset (refusing an upload
// it did not read) still passes. An aborted stream delivers what was written to it
// before the reset (RESET_STREAM_AT, transport.quicStream.Abort), as TCP
// delivers what was sent before a RST.
//
// The Dialer (dial.go) gives in-process users (the edge proxy) a peer's
// stream as a net.Conn whose reads into a large buffer gather what
// arrives within 250 µs (a body goes to the edge's client in a few writes,
// not one per packet batch) and whose read deadline is kept in the conn,
// put on the stream only when due (no timer per waiting read); why and
// the bounds are at streamConn.
//
// # UDP tunnels
//
// A UDP server (udp: true) dials nothing until a flow is registered; a
// UDP client (protocol "udp") binds a UDP socket and gives each client
// socket (source address) a flow:
//
//  1. Register: the client opens a stream and runs the handshake above
//     with TunnelOpen.Flow = a random non-zero uint64 (a TCP client sends
//     0; a server answers a mismatch "wrong protocol"). The server dials
//     a connected UDP socket to host:port, registers (peer, flow id) and
//     answers TunnelOpenReply{Err: ""}; both sides then close the stream:
//     a flow holds no stream. Refusals besides those above: "too many
//     flows", "flow id in use".
//  2. Data: each datagram is a QUIC datagram [8-byte big-endian flow
//     id][payload], both ways; the server sends the target's replies back
//     with the same flow id. Flows are keyed by (peer, id), so a peer only
//     reaches flows it registered; a datagram of an unknown flow is
//     answered [8 zero bytes][its flow id] (an unknown-flow datagram;
//     0 is never a flow's id), to that peer only, and not logged. A
//     client's flow takes its peer's datagrams only once the handshake
//     was accepted (with the server's proof): a provider that learnt the
//     id from the open and holds no key injects nothing. Datagrams a
//     client socket sends while its handshake runs wait (up to 16, more
//     are dropped).
//  3. End: a flow with no datagram either way for Deps.UDPIdleTimeout
//     (60 s) ends on each side on its own; so does a flow whose peer
//     connection closed or whose server or client stopped. A client
//     socket's next datagram after that registers a new flow. A server
//     that forgot a flow (restarted) answers its datagrams with
//     unknown-flow datagrams, which end the flow on the client's side
//     (once its handshake was accepted), so the socket's next datagram
//     registers a new one.
//
// A flow that cannot be opened (no provider reachable, a refusal) makes
// the client's new flows wait, LookupBackoff (100 ms doubling to 5 s,
// reset by a flow that opens): meanwhile datagrams that would open a
// flow are dropped and counted in Counters.DroppedDatagrams, so that a
// program that keeps sending to a server nobody can reach costs the
// providers one handshake per wait, not one per datagram.
//
// Caps: Deps.MaxFlowsPerPeer (1024) flows per peer on this node's
// servers: at the cap new flows are refused ("too many flows", counted in
// Counters.RefusedStreams; the client drops that socket's datagrams and
// tries again on its next one after its wait, above) and the open flows
// go on. A client keeps at most as many sockets' flows; datagrams from
// further sockets are dropped. A payload over the QUIC datagram limit (the path MTU minus
// overhead, about 1,200-1,450 bytes) cannot be sent: it is dropped and
// counted in Counters.DroppedDatagrams and the tunnel's lastError; so is
// a datagram over 2,048 bytes (maxUDPRead) from a client socket or a
// target, also on the path of a client on the node of its server (which
// has no QUIC limit): never passed on cut to its first 2,048 bytes. A
// datagram the host refuses to write to a flow's socket (a firewall's
// output drop: EPERM; no buffers; no route for a moment; see
// transport.IsTransientSendErr) is lost as the network would lose it:
// counted in Counters.DroppedDatagrams, and the flow goes on. A
// client on the node of its server sends straight to the target.
// Counters: connections are flows; bytes are datagram payloads.
//
// # States
//
// Server: starting (spawned), running (in the dispatch table and
// announced), stopped (between a stop and a start). Client: starting
// (binding, or bound and no server found yet: new connections are
// refused at once and the lookup retries with backoff), running (bound
// and a server is reachable: a server on this node of the other
// protocol is not), error (the bind failed; info.error says
// why, e.g. how to allow a port below 1024; it retries with backoff),
// stopped. Restart frees the port and closes every connection before
// binding again; delete answers once the actor stopped. A client being
// moved onto a new key (follow.go) has no actor until the one of its old
// key stopped: delete and restart answer once that one stopped.
//
// # Logs and hints
//
// Events go to Deps.Log (the tunnel channel) and, as Hint{Type:
// "tunnel-log", Data: {id, level, message}}, to the event stream, with
// update-tunnel / update-tunnel-clients after changes and update-database
// once a server's domain is claimed.
package tunnel
