package messages

// Hint is a change hint published on the actor system's event stream; the
// WebSocket hub fans it out to clients as {"type": Type, ...Data}.
type Hint struct {
	Type string         // e.g. "update-database", "update-peers"
	Data map[string]any // optional payload fields, nil for a bare hint
}

// Hint types of the admin spec's Broadcast columns.
const (
	HintDatabase      = "update-database"
	HintPeers         = "update-peers"
	HintCerts         = "update-certs"
	HintInterfaces    = "update-interfaces"
	HintLocalDNS      = "update-local-dns"
	HintTunnel        = "update-tunnel"
	HintTunnelClients = "update-tunnel-clients"
	HintSettings      = "update-settings"
	HintPlugins       = "update-plugins"
	HintPluginSetting = "update-plugin-settings"
)

// HintHealth is the health payload of GET /api/health (its own ISO
// timestamp included), published when the health status changes; the
// hub sends it only to the update-stats subscribers, the spec's
// "diagnostics subscribers" (the stats-snapshot they took carries the
// health it updates).
const HintHealth = "update-health"

// HintSystemReset tells WebSocket clients to reload: the node restored
// a backup and restarted its services.
const HintSystemReset = "system-reset"

// HintPluginLog is a line a plugin's handler logged ({domain, level,
// component, message}); the hub sends it as a plugin-log message.
const HintPluginLog = "plugin-log"

// HintTunnelLog is a tunnel event ({id, level, message}); the hub sends
// it to WebSocket clients as a tunnel-log message.
const HintTunnelLog = "tunnel-log"

// StatsUpdate is one sample's update-stats WebSocket message, built once
// by the stats sampler; the WebSocket hub queues the same bytes to every
// subscriber.
type StatsUpdate struct{ Payload []byte }
