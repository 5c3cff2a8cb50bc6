package peer

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// maxStash bounds frames held back during the handshake; more are
// dropped (the next version-vector exchange repairs what was lost). The
// reader hands over only one such frame before the session is
// established (handshakeKind), so the bound is a second line.
const maxStash = 256

func (s *session) handshaking(c actor.Context) {
	switch m := c.Message().(type) {
	case *frame:
		switch m.m.Kind {
		case messages.KindHello:
			s.onHello(c, m.m.Hello)
		case messages.KindAccept:
			s.onAccept(c, m.m.Accept)
		default:
			// The peer finished its side first; keep its frames for later.
			if len(s.stash) < maxStash {
				s.stash = append(s.stash, m.m)
			} else if m.m.Kind == messages.KindOps {
				s.releaseCredit()
			}
		}
	case *admitResult:
		if !m.ok {
			s.refuseQuiet(messages.RefuseViewFull, "active view full", m.sample)
			return
		}
		s.sendAccept(c, &messages.Accept{})
	case *redeemResult:
		if m.refuse != nil {
			s.refuse(c, m.refuse.Code, m.refuse.Reason)
			return
		}
		s.sendAccept(c, m.accept)
	case *tick:
		if m.now.Sub(s.started) > s.cfg.handshakeTimeout {
			s.cfg.log.Warn("closing peer connection: handshake timed out", "peer", short(s.peer))
			c.Send(c.Parent(), &sessionIssue{id: s.peer, kind: "handshake", reason: "handshake timed out"})
			s.closing = true
			_ = s.cfg.conn.Close("handshake timeout")
		}
	}
}

func (s *session) onHello(c actor.Context, h *messages.Hello) {
	if s.peerHello != nil {
		s.protocolError(c, "second hello")
		return
	}
	if h.ID != s.peer {
		s.refuse(c, messages.RefuseInternal, "hello id does not match the TLS key")
		return
	}
	s.peerHello = h
	ours := s.cfg.hello.Network
	switch {
	case h.Join != nil:
		if ours == "" {
			s.refuse(c, messages.RefuseNoNetwork, "this node has not joined a network yet")
			return
		}
		c.Request(c.Parent(), &redeemJoin{peer: s.peer, req: h.Join})
	case ours == "":
		if s.cfg.joinInviter == s.peer && h.Network == s.cfg.joinNetwork {
			s.sendAccept(c, &messages.Accept{})
			return
		}
		s.refuse(c, messages.RefuseNoNetwork, "this node has not joined its network yet")
	case h.Network == "":
		s.refuse(c, messages.RefuseNoNetwork, "peer belongs to no network and brought no invite")
	case h.Network != ours:
		s.refuse(c, messages.RefuseForeignNetwork, "peer belongs to another network")
	default:
		f := c.RequestFuture(s.cfg.ledger, &messages.IsWriter{ID: s.peer}, s.cfg.askTimeout)
		c.ReenterAfter(f, func(res any, err error) {
			if s.closing {
				return
			}
			r, ok := res.(*messages.IsWriterReply)
			switch {
			case err != nil || !ok:
				s.refuse(c, messages.RefuseInternal, fmt.Sprintf("cannot check writers: %v", errText(err)))
			case !r.OK:
				s.refuse(c, messages.RefuseNotWriter, "peer is not a writer of this network")
			case !s.cfg.conn.Outbound():
				// The peer asks to join our active view: the supervisor
				// says whether it has room (view.go).
				c.Request(c.Parent(), &admitNeighbour{peer: s.peer, neighbours: h.Neighbours})
			default:
				s.sendAccept(c, &messages.Accept{})
			}
		})
	}
}

func (s *session) sendAccept(c actor.Context, a *messages.Accept) {
	if s.closing || s.sentAccept {
		return
	}
	s.enqueue(&messages.Envelope{Kind: messages.KindAccept, Accept: a})
	s.sentAccept = true
	s.maybeEstablish(c)
}

func (s *session) onAccept(c actor.Context, a *messages.Accept) {
	if s.gotAccept {
		s.protocolError(c, "second accept")
		return
	}
	s.gotAccept = true
	if a.Network == "" || s.cfg.hello.Network != "" {
		s.maybeEstablish(c)
		return
	}
	// Our invite was accepted: join the network before replicating.
	if s.cfg.joinInviter != s.peer || a.Network != s.cfg.joinNetwork {
		s.protocolError(c, "unexpected network in accept")
		return
	}
	s.joinPending = true
	f := c.RequestFuture(s.cfg.ledger, &messages.JoinNetwork{Key: a.Network, Root: a.Root, Inviter: s.peer}, s.cfg.askTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		s.joinPending = false
		r, ok := res.(*messages.JoinNetworkReply)
		if err == nil && ok && r.Err != nil {
			err = r.Err
		} else if err == nil && !ok {
			err = fmt.Errorf("unexpected reply %T", res)
		}
		if err != nil {
			s.cfg.log.Error("joining the network failed", "err", err)
			c.Send(c.Parent(), &sessionIssue{id: s.peer, kind: "join", reason: "ledger refused to join: " + err.Error()})
			s.closing = true
			_ = s.cfg.conn.Close("join failed")
			return
		}
		s.cfg.hello.Network, s.cfg.hello.Root = a.Network, a.Root
		s.cfg.log.Info("joined network", "inviter", short(s.peer), "root", short(a.Root))
		c.Send(c.Parent(), &joined{network: a.Network, root: a.Root})
		s.maybeEstablish(c)
	})
}

func (s *session) maybeEstablish(c actor.Context) {
	if !s.sentAccept || !s.gotAccept || s.joinPending || s.closing {
		return
	}
	s.behavior.Become(s.established)
	close(s.up) // the reader reads on (session_io.go)
	// From here the peer is a writer (or a joiner we admitted): its
	// connection no longer counts as one of the pending unknown keys the
	// endpoint caps.
	s.cfg.conn.Admit()
	c.Send(c.Parent(), &sessionUp{pid: c.Self(), id: s.peer, hello: s.peerHello, remote: s.cfg.conn.RemoteAddr().String(), out: s.cfg.conn.Outbound()})
	s.peerVV = messages.VersionVector{}
	// lastPeerVV stays nil until the peer's first vector: that one is
	// answered with everything (syncFirst, session_sync.go).
	s.sentVV, s.sentAt = messages.VersionVector{}, map[string]time.Time{}
	s.sendVV(c, messages.KindVV)
	if s.lz.pruned { // we have feeds enough: our pushes to the peer go on (session_lazy.go)
		s.enqueue(&messages.Envelope{Kind: messages.KindPrune, Overlay: &messages.Overlay{}})
	}
	// Read our set now, not when the supervisor hears sessionUp: an
	// Announce in between reaches this session as sendTunnels.
	if ids := s.cfg.mesh.ownIDs(); len(ids) > 0 {
		s.announce(ids)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopStreams = cancel
	go serveStreams(ctx, s.cfg.conn, s.cfg.mesh)
	stash := s.stash
	s.stash = nil
	for _, m := range stash {
		s.established(&replayContext{Context: c, msg: &frame{m: m}})
	}
}

// replayContext replays a stashed frame through the established behaviour.
type replayContext struct {
	actor.Context
	msg any
}

func (r *replayContext) Message() any { return r.msg }
