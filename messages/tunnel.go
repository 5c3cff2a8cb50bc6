package messages

import "errors"

// Tunnel servers and clients: the admin API's requests to the tunnels
// supervisor (actors/tunnel) and the wire messages of a tunnel stream.

// Sentinels of the tunnel requests.
var (
	// ErrUnknownTunnel: no server or client with that id (the spec gives
	// 500 with a message for it).
	ErrUnknownTunnel = errors.New("unknown tunnel id")
	// ErrBadTunnel: a field is missing or invalid (port out of range, a
	// key that is not hs:// + 64 hex, a host that is neither an address
	// nor a name); nothing was created.
	ErrBadTunnel = errors.New("invalid tunnel request")
	// ErrDomainNotOwned: a tunnel client was asked for a domain the local
	// writer does not own (400).
	ErrDomainNotOwned = errors.New("domain is not owned by this node")
)

// Tunnel server and client states (spec).
const (
	TunnelRunning  = "running"
	TunnelStarting = "starting"
	TunnelStopped  = "stopped"
	TunnelError    = "error"
)

// TunnelServerOpts is a tunnel server's configuration: the tunnel-create
// body and the opts of a listing. Key is the seed (kept, never listed).
type TunnelServerOpts struct {
	Name   string `json:"name"`
	Port   int    `json:"port"`
	Host   string `json:"host"`
	Key    string `json:"-"`
	Domain string `json:"domain,omitempty"`
	Secure bool   `json:"secure"`
	UDP    bool   `json:"udp"`
	Log    int    `json:"log"`
}

// TunnelCounters are a server's or client's traffic counters.
type TunnelCounters struct {
	ConnectionsOpen  int64  `json:"connectionsOpen"`
	ConnectionsTotal int64  `json:"connectionsTotal"`
	BytesIn          int64  `json:"bytesIn"`  // from the network into the local side
	BytesOut         int64  `json:"bytesOut"` // from the local side out
	LastError        string `json:"lastError,omitempty"`
}

// TunnelServerInfo is the info object of a tunnel server.
type TunnelServerInfo struct {
	State string `json:"state"`
	URL   string `json:"url,omitempty"` // hs:// key while running
	TunnelCounters
}

// TunnelServer is one item of GET /api/tunnel-servers.
type TunnelServer struct {
	ID   string           `json:"id"`
	Opts TunnelServerOpts `json:"opts"`
	Info TunnelServerInfo `json:"info"`
}

// CreateTunnelServer starts and persists a server; the reply has its id.
type CreateTunnelServer struct{ Opts TunnelServerOpts }

// CreateTunnelServerReply answers CreateTunnelServer.
type CreateTunnelServerReply struct {
	ID  string
	Err error
}

// DeleteTunnelServer stops a server, closes its connections and forgets it.
type DeleteTunnelServer struct{ ID string }

// RestartTunnelServer stops and starts a server with the same key.
type RestartTunnelServer struct{ ID string }

// GetTunnelServers lists the servers.
type GetTunnelServers struct{}

// GetTunnelServersReply answers GetTunnelServers.
type GetTunnelServersReply struct {
	Servers []TunnelServer
	Err     error
}

// TunnelClientOpts is a tunnel client's configuration (spec: opts).
type TunnelClientOpts struct {
	Domain      string `json:"domain"`
	Key         string `json:"key"`
	Port        int    `json:"port"`
	Protocol    string `json:"protocol"`
	ServiceName string `json:"serviceName,omitempty"`
}

// TunnelClientInfo is the info object of a tunnel client.
type TunnelClientInfo struct {
	State   string `json:"state"`
	Error   string `json:"error,omitempty"`
	Address string `json:"address,omitempty"` // ip:port it listens on
	TunnelCounters
}

// TunnelClient is one item of GET /api/tunnel-clients.
type TunnelClient struct {
	ID   string           `json:"id"`
	Opts TunnelClientOpts `json:"opts"`
	Info TunnelClientInfo `json:"info"`
}

// CreateTunnelClient starts and persists a client.
type CreateTunnelClient struct{ Opts TunnelClientOpts }

// CreateTunnelClientReply answers CreateTunnelClient.
type CreateTunnelClientReply struct {
	ID  string
	Err error
}

// DeleteTunnelClient stops a client, closing its connections.
type DeleteTunnelClient struct{ ID string }

// RestartTunnelClient frees the port and closes the connections, then
// binds again.
type RestartTunnelClient struct{ ID string }

// GetTunnelClients lists the clients.
type GetTunnelClients struct{}

// GetTunnelClientsReply answers GetTunnelClients.
type GetTunnelClientsReply struct {
	Clients []TunnelClient
	Err     error
}

// TunnelWriteReply answers the delete and restart requests.
type TunnelWriteReply struct{ Err error }

// TunnelOpen is the first frame a client writes on a tunnel stream: the
// announced id of the server it wants and, for a secure server, the proof
// that it knows the secret (see actors/tunnel's package doc).
type TunnelOpen struct {
	ID    string `cbor:"1,keyasint"`
	Proof []byte `cbor:"2,keyasint,omitempty"`
	// Flow is not 0 on a UDP tunnel: it registers that flow id, which the
	// datagrams of this client socket then carry (see actors/tunnel).
	Flow uint64 `cbor:"3,keyasint,omitempty"`
	// Proven: this server already proved on this connection that it
	// holds the tunnel's key (TunnelOpenReply.Proof); the reply needs
	// none (see actors/tunnel).
	Proven bool `cbor:"4,keyasint,omitempty"`
}

// TunnelOpenReply is the server's answer; an empty Err means the bytes
// that follow are the service's.
type TunnelOpenReply struct {
	Err string `cbor:"1,keyasint,omitempty"`
	// Proof (on an accepted open) shows that the server holds the
	// tunnel's key, so a peer that merely announces another server's id
	// cannot take its clients' connections (see actors/tunnel).
	Proof []byte `cbor:"2,keyasint,omitempty"`
}
