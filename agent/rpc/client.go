package rpc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

// Client calls agents over the peer transport with its own identity.
type Client struct {
	ep  *transport.QUICEndpoint
	now func() time.Time
}

// NewClient opens a QUIC endpoint for calls on UDP address listen ("":
// "127.0.0.1:0", enough for agents on this host; callers that reach other
// hosts pass "0.0.0.0:0").
func NewClient(id *identity.Identity, listen string) (*Client, error) {
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	ep, err := transport.Listen(transport.Config{Identity: id, ListenAddr: listen})
	if err != nil {
		return nil, err
	}
	return &Client{ep: ep, now: time.Now}, nil
}

// Endpoint is the client's QUIC endpoint (the child streamer dials with it).
func (c *Client) Endpoint() *transport.QUICEndpoint { return c.ep }

// Close closes the endpoint and its connections.
func (c *Client) Close() error { return c.ep.Close() }

// ParseTarget splits "<key>@<host:port>".
func ParseTarget(s string) (key, addr string, err error) {
	key, addr, ok := strings.Cut(s, "@")
	key = strings.ToLower(key)
	if !ok || !messages.ValidPeerID(key) || addr == "" {
		return "", "", fmt.Errorf("%q: want <peer-key>@<host:port> (the key is 64 hex digits, shown as peer_public_key by the agent's /)", s)
	}
	return key, addr, nil
}

// ErrStatus is returned with a reply whose status is not 2xx.
var ErrStatus = errors.New("agent refused the call")

// NewRequest fills in a fresh nonce and the current time.
func NewRequest(method string) *messages.AgentRequest {
	n := make([]byte, 16)
	_, _ = rand.Read(n)
	return &messages.AgentRequest{Method: method, Nonce: n, TimeUnixNano: time.Now().UnixNano()}
}

// Conn is one connection to an agent; calls on it share it.
type Conn struct{ c transport.Conn }

// Dial connects to the agent at addr that must prove key.
func (c *Client) Dial(ctx context.Context, key, addr string) (*Conn, error) {
	conn, err := c.ep.Dial(ctx, addr, key)
	if err != nil {
		return nil, err
	}
	return &Conn{c: conn}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close("done") }

// Done is closed when the connection is gone.
func (c *Conn) Done() <-chan struct{} { return c.c.Done() }

// OpenStream opens a raw call stream (the child streamer uses it).
func (c *Conn) OpenStream(ctx context.Context) (transport.Stream, error) { return c.c.OpenStream(ctx) }

// Call sends req on a new stream and reads the reply. A non-2xx reply is
// returned together with an error wrapping ErrStatus.
func (c *Conn) Call(ctx context.Context, req *messages.AgentRequest) (*messages.AgentReply, error) {
	st, err := c.c.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = st.SetDeadline(dl)
	}
	if err := messages.WriteFrame(st, req, messages.AgentMaxFrame); err != nil {
		return nil, err
	}
	_ = st.CloseWrite()
	var rep messages.AgentReply
	if err := messages.ReadFrame(st, &rep, messages.AgentMaxFrame); err != nil {
		return nil, fmt.Errorf("read reply: %w", err)
	}
	if rep.Status < 200 || rep.Status > 299 {
		return &rep, fmt.Errorf("%w: %d %s", ErrStatus, rep.Status, rep.Error)
	}
	return &rep, nil
}

// Call dials, makes one call and closes.
func (c *Client) Call(ctx context.Context, key, addr string, req *messages.AgentRequest) (*messages.AgentReply, error) {
	conn, err := c.Dial(ctx, key, addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.Call(ctx, req)
}

// BuildRequest turns command-line words into a request:
//
//	info
//	get /api/v3/info                       (also: api.get)
//	retention.set tier0=3600 tier1=1209600 (seconds)
//	prune before=<unix> [chart=<id>]
//	functions.list
//	functions.run <name> [k=v ...]
//	logs <audit|journal|anomaly> [limit=N]
func BuildRequest(method string, args []string) (*messages.AgentRequest, error) {
	kv := map[string]string{}
	var pos []string
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok && !strings.HasPrefix(a, "/") {
			kv[k] = v
		} else {
			pos = append(pos, a)
		}
	}
	num := func(k string) (int64, error) {
		v, ok := kv[k]
		if !ok {
			return 0, nil
		}
		var n int64
		if _, err := fmt.Sscan(v, &n); err != nil {
			return 0, fmt.Errorf("%s=%q is not a number", k, v)
		}
		return n, nil
	}
	if method == "get" {
		method = messages.AgentGet
	}
	r := NewRequest(method)
	switch method {
	case messages.AgentInfo, messages.AgentFunctionsList:
	case messages.AgentGet:
		if len(pos) != 1 {
			return nil, errors.New("get needs one /api/... path")
		}
		r.Path = pos[0]
	case messages.AgentRetentionSet:
		t0, err := num("tier0")
		if err != nil {
			return nil, err
		}
		t1, err := num("tier1")
		if err != nil {
			return nil, err
		}
		r.Retention = &messages.AgentRetention{Tier0Seconds: t0, Tier1Seconds: t1}
	case messages.AgentPrune:
		b, err := num("before")
		if err != nil {
			return nil, err
		}
		r.Prune = &messages.AgentPruneArgs{Chart: kv["chart"], BeforeUnix: b}
	case messages.AgentFunctionsRun:
		if len(pos) != 1 {
			return nil, errors.New("functions.run needs a function name")
		}
		r.Function = &messages.AgentFunction{Name: pos[0], Args: kv}
	case messages.AgentLogs:
		if len(pos) != 1 {
			return nil, errors.New("logs needs a source: audit, journal or anomaly")
		}
		l, err := num("limit")
		if err != nil {
			return nil, err
		}
		r.Logs = &messages.AgentLogsArgs{Source: pos[0], Limit: int(l)}
	default:
		return nil, fmt.Errorf("unknown method %q (info, get, retention.set, prune, functions.list, functions.run, logs)", method)
	}
	return r, r.Validate()
}
