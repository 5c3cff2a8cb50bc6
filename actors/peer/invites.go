package peer

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
	"peerdns/transport"
)

func (a *Actor) createInvite(m *messages.CreateInvite) *messages.CreateInviteReply {
	if a.network == "" {
		return &messages.CreateInviteReply{Err: messages.ErrNotInitialised}
	}
	inv, err := transport.NewInvite(a.d.Identity, a.network, a.root, a.advertise(), m.TTL, a.d.Now())
	if err != nil {
		return &messages.CreateInviteReply{Err: err}
	}
	s, err := inv.Encode()
	if err == nil {
		err = a.book.Issue(inv)
	}
	if err != nil {
		return &messages.CreateInviteReply{Err: fmt.Errorf("create invite: %w", err)}
	}
	a.diag.invitesCreated++
	a.log.Info("invite created", "expiresAt", time.UnixMilli(inv.ExpiresAt).UTC().Format(time.RFC3339))
	return &messages.CreateInviteReply{Invite: s, ExpiresAt: inv.ExpiresAt}
}

// redeem admits a joiner: the invite must be ours, for our network,
// unexpired, unused and presented by the key it is bound to. The ledger
// then adds the joiner as a writer with a signed op.
func (a *Actor) redeem(c actor.Context, m *redeemJoin) {
	sender := c.Sender()
	refuse := func(code, why string) {
		a.diag.invitesRefused++
		a.log.Warn("refusing invite", "peer", short(m.peer), "code", code, "reason", why)
		c.Send(sender, &redeemResult{refuse: &messages.Refuse{Code: code, Reason: why}})
	}
	inv, err := transport.ParseInvite(m.req.Invite)
	switch {
	case err != nil:
		refuse(messages.RefuseInviteInvalid, err.Error())
		return
	case inv.Inviter != a.self:
		refuse(messages.RefuseInviteInvalid, "invite was issued by another node")
		return
	case inv.Network != a.network:
		refuse(messages.RefuseForeignNetwork, "invite is for another network")
		return
	case !inv.CheckProof(m.peer, m.req.Proof):
		refuse(messages.RefuseInviteInvalid, "join proof does not match the peer's key")
		return
	}
	if err := a.book.Redeem(inv, m.peer, a.d.Now()); err != nil {
		switch {
		case errors.Is(err, transport.ErrInviteExpired):
			refuse(messages.RefuseInviteExpired, err.Error())
		case errors.Is(err, transport.ErrInviteUsed):
			refuse(messages.RefuseInviteUsed, err.Error())
		case errors.Is(err, transport.ErrInviteUnknown), errors.Is(err, transport.ErrInviteInvalid):
			refuse(messages.RefuseInviteInvalid, err.Error())
		default:
			refuse(messages.RefuseInternal, err.Error())
		}
		return
	}
	f := c.RequestFuture(a.d.Ledger, &messages.AddWriter{ID: m.peer}, a.d.AskTimeout)
	c.ReenterAfter(f, func(res any, err error) {
		r, ok := res.(*messages.AddWriterReply)
		if err == nil && !ok {
			err = fmt.Errorf("unexpected reply %T", res)
		} else if err == nil {
			err = r.Err
		}
		if err != nil {
			_ = a.book.Release(inv, m.peer)
			refuse(messages.RefuseInternal, "could not add writer: "+err.Error())
			return
		}
		a.diag.invitesRedeemed++
		a.log.Info("invite redeemed: new writer added", "peer", short(m.peer))
		c.Send(sender, &redeemResult{accept: &messages.Accept{Network: a.network, Root: a.root}})
	})
}

func (a *Actor) onJoined(c actor.Context, m *joined) {
	if a.network != "" {
		return
	}
	a.network, a.root = m.network, m.root
	a.joinInv, a.joinReq = nil, nil
	a.publishHint()
}
