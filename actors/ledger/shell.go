package ledger

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/consensus"
	"peerdns/actors/domain"
	"peerdns/messages"
)

// The actor's side of the machine (machine.go): feed it an input with the
// current time, carry out what it answers.

// waitReply is a waiter's answer: msg to to (when set), then the hints.
type waitReply struct {
	to    *actor.PID
	msg   any
	hints []string
}

// step feeds the machine one input and carries out its output.
func (a *Actor) step(c actor.Context, in any) Output {
	out := a.m.Step(in, time.Now())
	a.do(c, out)
	return out
}

// do carries out a machine's output.
func (a *Actor) do(c actor.Context, out Output) {
	for _, name := range out.Retire {
		a.retire(c, name)
	}
	for _, name := range out.Assign {
		a.assignIP(name)
	}
	if len(out.Evaluate) > 0 {
		a.evaluate(c, out.Evaluate)
	}
	if out.Publish {
		a.publish()
	}
	for _, r := range out.Replies {
		r := r.(waitReply)
		if r.to != nil {
			c.Send(r.to, r.msg)
		}
		for _, h := range r.hints {
			a.publishHint(h)
		}
	}
	if out.Publish {
		a.publishHint(messages.HintDatabase)
	}
	for _, t := range out.Timers {
		a.arm(c, t)
	}
}

// arm sends a timer's self-message, at once or after its delay.
func (a *Actor) arm(c actor.Context, t Timer) {
	var msg any
	switch t.Kind {
	case timerClaims:
		msg = &commitClaims{gen: t.Gen}
	case timerVotes:
		msg = &commitVotes{}
	case timerOps:
		msg = &applyOpsNow{}
	case timerEval:
		msg = &evalNow{}
	case timerPublish:
		msg = &publishNow{}
	case timerRetry:
		msg = &retryWrites{}
	}
	if t.After > 0 {
		sys, self := c.ActorSystem(), c.Self()
		time.AfterFunc(t.After, func() { sys.Root.Send(self, msg) })
		return
	}
	c.Send(c.Self(), msg)
}

// evaluate asks the domain actors of a round for their evaluations,
// spawning the missing ones.
func (a *Actor) evaluate(c actor.Context, reqs []EvalRequest) {
	active := a.activeSet() // read-only once handed out
	members := a.memberSet
	for _, r := range reqs {
		pid := a.children[r.Domain]
		if pid == nil {
			pid = c.Spawn(domain.Props(r.Domain, a.d.Now, a.d.DomainMiddleware...))
			a.children[r.Domain] = pid
		}
		c.Request(pid, &domain.Evaluate{
			Domain: r.Domain, Version: r.Key.version, Epoch: r.Key.epoch, Self: a.st.self,
			Input: consensus.Restrict(a.st.input(r.Domain, active), members.Replicas(r.Domain)), Recalc: r.Recalc,
		})
	}
}

// ledgerView for the machine's rounds.
type stateView struct{ a *Actor }

func (v stateView) domain(name string) (uint64, bool, bool) {
	idx := v.a.st.domains[name]
	if idx == nil {
		return 0, false, false
	}
	return idx.version, true, len(idx.claims) > 0
}

// needsVote: beyond R only for a domain whose replica set holds us
// (AutoVote plans no vote elsewhere). The round reads the membership
// flush built just before it.
func (v stateView) needsVote(name string) bool {
	if !v.a.writable() || !v.a.st.unvoted(name) {
		return false
	}
	if v.a.memberSet == nil {
		return true
	}
	reps := v.a.memberSet.Replicas(name)
	return reps == nil || reps[v.a.st.self]
}
