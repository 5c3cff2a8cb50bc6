package peer

import (
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// announce makes ids (our full set) the next tunnels frame for the peer.
func (s *session) announce(ids []string) {
	if !s.tunnelsDirty && slices.Equal(s.ownTunnels, ids) {
		return
	}
	s.ownTunnels, s.tunnelsDirty = ids, true
	s.flushTunnels()
}

// flushTunnels queues the pending announcement; when the queue is full it
// stays pending for the next tick.
func (s *session) flushTunnels() {
	if !s.tunnelsDirty || s.closing {
		return
	}
	if s.enqueue(&messages.Envelope{Kind: messages.KindTunnels, Tunnels: &messages.TunnelIDs{IDs: s.ownTunnels}}) {
		s.tunnelsDirty = false
	}
}

// onTunnels checks a peer's announcement and hands it to the supervisor,
// which publishes it in the mesh. A bad one (an id that is not 64
// lowercase hex, more than MaxTunnelIDs ids) is refused whole, logged and
// counted; the connection stays up, since the ledger traffic it carries
// is fine.
func (s *session) onTunnels(c actor.Context, t *messages.TunnelIDs) {
	if err := t.Validate(); err != nil {
		s.cfg.log.Warn("refused tunnel announcement", "peer", short(s.peer), "ids", len(t.IDs), "err", err)
		c.Send(c.Parent(), &tunnelsAnnounced{pid: c.Self(), id: s.peer, refused: err.Error()})
		return
	}
	c.Send(c.Parent(), &tunnelsAnnounced{pid: c.Self(), id: s.peer, ids: t.IDs})
}
