package tunnel

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// serverActor owns one tunnel server: the handle the data path uses
// (target, key, live connections) and the claim of its domain. A server
// does not listen on anything: peers reach it through the supervisor's
// stream dispatch, which also sets its state (serverUp, serverDown).
// Fields are touched only from Receive.
type serverActor struct {
	d  Deps
	ev *events
	e  *serverEntry // shared with the supervisor: stats and state are atomics
	h  *serverHandle
}

func serverProps(d Deps, ev *events, e *serverEntry) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &serverActor{d: d, ev: ev, e: e} })
}

// Receive handles one message.
func (a *serverActor) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started:
		a.start(c)
	case *actor.Stopping, *actor.Restarting:
		a.stop(c)
	case *messages.RestartTunnelServer:
		a.stop(c)
		a.start(c)
		a.ev.emit(slog.LevelInfo, a.e.rec.ID, "tunnel server restarted")
		c.Respond(&messages.TunnelWriteReply{})
	}
}

func (a *serverActor) start(c actor.Context) {
	o := a.e.rec.Opts
	a.h = &serverHandle{
		id: a.e.rec.ID, key: a.e.key, target: net.JoinHostPort(o.Host, strconv.Itoa(o.Port)),
		stats: a.e.stats, conns: newConnSet(), ev: a.ev, dial: a.d.DialTimeout, udp: o.UDP,
		maxStreams: int64(a.d.MaxStreamsPerTunnel),
	}
	// The supervisor registers and announces it, then shows it running.
	c.Send(c.Parent(), &serverUp{h: a.h, e: a.e})
	if o.Domain != "" {
		a.claim(c, o.Domain)
	}
}

// stop withdraws the handle and tears its connections down.
func (a *serverActor) stop(c actor.Context) {
	if a.h == nil {
		return
	}
	c.Send(c.Parent(), &serverDown{h: a.h, e: a.e})
	a.h.conns.closeAll()
	a.h = nil
}

// claim asks the ledger to point domain at this server's key, keeping
// the ssl flag of this node's claim when it has that key already (set by
// add-domain; the claim is written again at every start). The answer
// comes back into Receive (ReenterAfter), so Receive never waits on it.
func (a *serverActor) claim(c actor.Context, domain string) {
	id := a.e.rec.ID
	if a.d.Ledger == nil {
		a.ev.emit(slog.LevelWarn, id, "no ledger: domain not claimed", "domain", domain)
		return
	}
	f := c.RequestFuture(a.d.Ledger, &messages.AddDomain{Domain: domain, Hash: a.e.key.URL, KeepSSL: true}, a.d.ClaimTimeout)
	ev, st := a.ev, a.e.stats
	c.ReenterAfter(f, func(res any, err error) {
		if err == nil {
			if r, ok := res.(*messages.AddDomainReply); !ok {
				err = fmt.Errorf("unexpected ledger reply %T", res)
			} else {
				err = r.Err
			}
		}
		if err != nil {
			st.fail("claim " + domain + ": " + err.Error())
			ev.emit(slog.LevelError, id, "claiming the domain failed", "domain", domain, "err", err)
			return
		}
		ev.emit(slog.LevelInfo, id, "domain claimed for the tunnel", "domain", domain)
		ev.hint(messages.HintDatabase)
	})
}
