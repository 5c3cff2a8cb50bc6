package peer

import (
	"errors"
	"fmt"
	"strings"
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
	a.netSince = a.d.Now()
	a.joinInv, a.joinReq = nil, nil
	a.gate.setJoining("")
	a.publishHint()
}

// startJoin starts dialing the inviter of the --join invite. An invite
// that cannot work however often we dial (malformed, badly signed,
// expired) fails the join for good instead; it reports whether dialing
// started.
func (a *Actor) startJoin() bool {
	inv, err := transport.ParseInvite(a.d.Join)
	if err == nil {
		err = inv.Verify(a.d.Now())
	}
	var req *messages.JoinRequest
	if err == nil {
		req, err = inv.JoinRequest(a.d.Identity)
	}
	if err != nil {
		a.failJoin(fmt.Errorf("join: %w", err))
		return false
	}
	a.joinInv, a.joinReq, a.netKnown = inv, req, true
	a.gate.setJoining(inv.Inviter)
	a.log.Info("joining network", "inviter", short(inv.Inviter), "addrs", strings.Join(inv.Addrs, ","))
	for _, addr := range inv.Addrs {
		a.startDialer(addr, inv.Inviter, dialOpts{}) // the inviter does not know us: no race
	}
	return true
}

// joinRefusal maps the code of an inviter's refusal to the invite error
// it means, or nil when a later attempt may succeed (the inviter's ledger
// did not answer, or it is still starting).
func joinRefusal(code string) error {
	switch code {
	case messages.RefuseInviteExpired:
		return transport.ErrInviteExpired
	case messages.RefuseInviteUsed:
		return transport.ErrInviteUsed
	case messages.RefuseInviteInvalid, messages.RefuseForeignNetwork:
		return transport.ErrInviteInvalid
	}
	return nil
}

// refusedJoin is the inviter's definite refusal: Error is the line an
// operator reads, Unwrap the invite error callers can branch on.
type refusedJoin struct {
	msg string
	err error
}

func (e *refusedJoin) Error() string { return e.msg }
func (e *refusedJoin) Unwrap() error { return e.err }

// onInviteRefused fails the join when the inviter refused our invite for
// a reason no retry can change; other refusals leave the dialer retrying.
func (a *Actor) onInviteRefused(m *inviteRefused) {
	if a.joinInv == nil || m.peer != a.joinInv.Inviter {
		return
	}
	sentinel := joinRefusal(m.code)
	if sentinel == nil {
		return
	}
	reason := m.reason
	if reason == "" {
		reason = m.code
	}
	a.failJoin(&refusedJoin{msg: fmt.Sprintf("join: %s (refused by the inviter %s)", reason, short(m.peer)), err: sentinel})
}

// failJoin gives up joining for good: it stops dialing the inviter,
// records why (status and diagnostics show it) and reports it once
// through Deps.Fatal.
func (a *Actor) failJoin(err error) {
	if a.joinErr != "" {
		return
	}
	a.joinErr = err.Error()
	a.log.Error("cannot join the network", "err", err)
	a.diag.issue(a.d.Now(), messages.ConnectionIssue{Kind: "invite", Reason: err.Error()})
	if inv := a.joinInv; inv != nil {
		for _, addr := range inv.Addrs {
			a.dropDialer(addr)
		}
		a.joinInv, a.joinReq, a.netKnown = nil, nil, false
		a.gate.setJoining("")
		a.publishHint()
	}
	if a.d.Fatal != nil {
		a.d.Fatal(err)
	}
}
