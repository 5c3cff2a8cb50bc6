// Package rpc is the agent's admin RPC on the peer transport: how an
// operator manages an agent remotely without opening its HTTP port, and
// how a child reaches its parent.
//
// It owns: the QUIC endpoint of the agent (transport.Listen with the
// agent's own identity, DATA/agent/identity.key), the allowlist
// (allow.go: DATA/agent/peers.json, key → admin, viewer or child, re-read
// at every call, and every 5 s of a child's stream, which ends once the
// key is no longer a child's), the audit trail (audit.go: every call, allowed or not,
// as a JSON line in DATA/agent/audit.log), the replay guard (replay.go:
// nonce + time window), the methods (server.go), the jobs functions.run
// runs (functions.go) and the client (client.go) that `peerdns agent call`
// and the tests use.
//
// One call is one QUIC stream: the caller writes one messages.AgentRequest
// frame, the agent answers one messages.AgentReply frame and closes the
// stream. The control stream of the connection carries nothing: QUIC
// already authenticated both keys, and the role is looked up per call. The
// "stream" method hands its stream to a StreamHandler (agent/fleet).
//
// Decisions where the spec is silent: functions.run is admin-only (process
// command lines and sockets say more about a host than its metrics);
// logs is answered by the REST logs command in-process, so its sources
// (audit, journal, the anomaly detector's events) and their errors are
// the REST API's, and only anomaly is open to viewers (api.get is judged
// by the command the REST handler will run: after decoding, dot
// segments and its /host/<name>/ switch); an unknown key
// gets one 403 answer before its connection is closed, so an operator
// sees why instead of a reset.
//
// It must never: answer a method before the role allowed it, run a
// request it could not decode and validate, hold more than a bounded
// number of nonces (of all peers, and of each: one peer at its share is
// refused alone), or take a frame's declared length in memory before
// its bytes arrived (messages.ReadFrame grows its buffer with them).
package rpc
