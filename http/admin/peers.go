package admin

// Peer network routes: invites and invite/connection diagnostics,
// answered by the peers supervisor (actors/peer) through messages/.

import (
	"errors"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
	"peerdns/messages"
)

// RegisterPeers adds POST /api/invites and GET /api/diagnostics/invites.
//
// POST /api/invites, optional body {"ttlSeconds": n} (default 24 h, at
// most 30 days) → 200 {"invite": "...", "expiresAt": <ms>}; 400 for a bad
// body, 503 while the node has not joined a network, 500 otherwise.
//
// GET /api/diagnostics/invites → 200 {"summary", "peers",
// "recommendations", "connectionIssues", "timestamp"}; 503 while the peer
// network is initialising.
func RegisterPeers(r *router.Router, log *slog.Logger, root *actor.RootContext, peers *actor.PID) {
	r.POST("/api/invites", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		return createInvite(ctx, root, peers)
	}))
	r.GET("/api/diagnostics/invites", httpx.Wrap(log, func(ctx *fasthttp.RequestCtx) error {
		return inviteDiagnostics(ctx, root, peers)
	}))
}

// createInviteRequest is the optional body of POST /api/invites.
type createInviteRequest struct {
	TTLSeconds *int64 `json:"ttlSeconds"`
}

func createInvite(ctx *fasthttp.RequestCtx, root *actor.RootContext, peers *actor.PID) error {
	var ttl time.Duration
	if len(ctx.PostBody()) > 0 {
		var req createInviteRequest
		if err := httpx.DecodeJSON(ctx, &req, fasthttp.StatusBadRequest); err != nil {
			return err
		}
		if req.TTLSeconds != nil {
			max := int64(messages.MaxInviteTTL / time.Second)
			if *req.TTLSeconds <= 0 || *req.TTLSeconds > max {
				return httpx.BadRequest("ttlSeconds must be between 1 and %d", max)
			}
			ttl = time.Duration(*req.TTLSeconds) * time.Second
		}
	}
	rep, err := httpx.Ask[*messages.CreateInviteReply](root, peers, &messages.CreateInvite{TTL: ttl}, httpx.AskTimeout)
	if err != nil {
		return peerAskError(err)
	}
	if errors.Is(rep.Err, messages.ErrNotInitialised) {
		return httpx.Errorf(fasthttp.StatusServiceUnavailable, "cannot create an invite: %v", rep.Err)
	}
	if rep.Err != nil {
		return httpx.Internal("cannot create an invite: %v", rep.Err)
	}
	return httpx.JSON(ctx, fasthttp.StatusOK, map[string]any{"invite": rep.Invite, "expiresAt": rep.ExpiresAt})
}

func inviteDiagnostics(ctx *fasthttp.RequestCtx, root *actor.RootContext, peers *actor.PID) error {
	rep, err := httpx.Ask[*messages.PeerDiagnosticsReply](root, peers, &messages.GetPeerDiagnostics{}, httpx.AskTimeout)
	if err != nil {
		return peerAskError(err)
	}
	if !rep.Ready {
		return httpx.Errorf(fasthttp.StatusServiceUnavailable, "peer network is initialising")
	}
	out := map[string]any{
		"summary":          rep.Summary,
		"peers":            nonNil(rep.Peers),
		"recommendations":  nonNil(rep.Recommendations),
		"connectionIssues": nonNil(rep.ConnectionIssues),
		"timestamp":        time.Now().UnixMilli(),
	}
	return httpx.JSON(ctx, fasthttp.StatusOK, out)
}

// nonNil renders empty lists as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func peerAskError(err error) error {
	if errors.Is(err, httpx.ErrBusy) {
		return httpx.Internal("peer network did not answer in time")
	}
	return httpx.Internal("peer network: %v", err)
}

// PeersSource answers the PeerSource questions (/api/peers, /api/status,
// health) from the peers supervisor.
func PeersSource(root *actor.RootContext, peers *actor.PID) PeerSource {
	return &peersSource{root: root, pid: peers}
}

type peersSource struct {
	root *actor.RootContext
	pid  *actor.PID
}

func (p *peersSource) Peers() ([]string, error) {
	r, err := httpx.Ask[*messages.GetPeersReply](p.root, p.pid, &messages.GetPeers{}, httpx.AskTimeout)
	if err != nil {
		return nil, err
	}
	return nonNil(r.IDs), nil
}

func (p *peersSource) Status() (bool, int, error) {
	r, err := httpx.Ask[*messages.GetPeerStatusReply](p.root, p.pid, &messages.GetPeerStatus{}, httpx.AskTimeout)
	if err != nil {
		return false, 0, err
	}
	return r.IsMaster, r.PeersCount, nil
}

// Reach is the peer network's view of its own reachability.
func (p *peersSource) Reach() (*messages.Reach, error) {
	r, err := httpx.Ask[*messages.GetPeerStatusReply](p.root, p.pid, &messages.GetPeerStatus{}, httpx.AskTimeout)
	if err != nil {
		return nil, err
	}
	return r.Reach, nil
}

// Healthy: the endpoint listens and the node knows its network (or is
// joining one). A lone master is healthy: having no peers is not a fault.
func (p *peersSource) Healthy() bool {
	r, err := httpx.Ask[*messages.GetPeerStatusReply](p.root, p.pid, &messages.GetPeerStatus{}, 2*time.Second)
	return err == nil && r.Listening && r.Ready
}
