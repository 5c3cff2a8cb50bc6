// Package domain is the actor that owns one domain's consensus: it is
// spawned by the ledger actor on the domain's first claim and stopped when
// the domain has no claims left. It caches the last ConsensusState (keyed
// by the ledger's per-domain version), keeps lastResolution and per-domain
// counters (across a crash restart too), and decides how the local peer
// votes (auto-voting). It never writes the ledger itself: it tells the
// ledger which votes to sign.
//
// The Evaluate/Evaluated messages live here rather than in messages/
// because they carry consensus.Input, and consensus imports messages.
package domain

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/consensus"
	"peerdns/internal/stack"
)

// Evaluate asks the domain actor for its consensus at ledger version
// Version with the active-peer set of epoch Epoch (the ledger bumps it on
// every peer-set change). Recalc drops the cached result first.
type Evaluate struct {
	Domain  string
	Version uint64
	Epoch   uint64
	Self    string
	Input   consensus.Input
	Recalc  bool
}

// Evaluated is the reply to Evaluate (sent to the ledger, the parent).
type Evaluated struct {
	Domain         string
	Version        uint64
	Epoch          uint64
	State          consensus.State
	Plan           consensus.VotePlan
	LastResolution int64 // unix ms, 0 = never
	Resolved       int   // evaluations that resolved
	Failed         int   // evaluations that did not
	Cached         bool
}

// Restarted is sent to the parent after a crash restart, so the ledger
// re-sends the evaluation that was lost with the crash.
type Restarted struct{ Domain string }

// Actor is one domain's consensus owner.
type Actor struct {
	name   string
	now    func() time.Time
	cached *Evaluated
	*history
}

// history is what the domain actor keeps across crash restarts: the
// counters and lastResolution describe the domain, not one incarnation
// of its actor. The cached evaluation is not kept (the crash may have
// come from it).
type history struct {
	lastRes  int64
	resolved int
	failed   int
}

// Props builds a domain actor for name. now may be nil (time.Now). Each
// call's actor keeps its counters and lastResolution across restarts, so
// spawn each domain actor from a Props of its own.
// Middleware wraps its Receive (tests use it to crash a real domain actor;
// the node passes none).
func Props(name string, now func() time.Time, middleware ...actor.ReceiverMiddleware) *actor.Props {
	if now == nil {
		now = time.Now
	}
	h := &history{} // one per spawned actor, shared by its incarnations
	return actor.PropsFromProducer(func() actor.Actor { return &Actor{name: name, now: now, history: h} },
		actor.WithReceiverMiddleware(middleware...), actor.WithDispatcher(stack.Actors))
}

// Receive handles one message.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Restarting:
		// The evaluation that crashed is lost: ask the ledger to re-send.
		if c.Parent() != nil {
			c.Send(c.Parent(), &Restarted{Domain: a.name})
		}
	case *Evaluate:
		c.Respond(a.evaluate(m))
	}
}

func (a *Actor) evaluate(m *Evaluate) *Evaluated {
	if !m.Recalc && a.cached != nil && a.cached.Version == m.Version && a.cached.Epoch == m.Epoch {
		out := *a.cached
		out.Cached = true
		return &out
	}
	st := consensus.Compute(m.Input)
	plan := consensus.AutoVote(m.Self, m.Input)
	// Only a settled outcome counts: while the local vote is still to be
	// cast the state is transient, not a failure.
	if plan.VoteFor == "" && len(plan.Retract) == 0 && len(m.Input.Claims) > 0 {
		if st.Status == consensus.Resolved {
			a.resolved++
			a.lastRes = a.now().UnixMilli()
		} else {
			a.failed++
		}
	}
	out := &Evaluated{
		Domain: a.name, Version: m.Version, Epoch: m.Epoch, State: st, Plan: plan,
		LastResolution: a.lastRes, Resolved: a.resolved, Failed: a.failed,
	}
	a.cached = out
	return out
}
