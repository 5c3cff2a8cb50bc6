package peer

import (
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// A writer may sign a suspicion of another whose seq is ahead of every
// clock (taken up to heartbeatMaxAge ahead: clocks may differ that
// much), naming a heartbeat its victim never signed. The victim's
// refutation must still refute it: signed at the victim's clock, its
// seq was below the suspicion's, so every node that took the suspicion
// kept the victim out (of the active set, and the quorum) until the
// victim's clock passed it, up to a minute for each such suspicion,
// not the one round trip a false suspicion costs.
func TestRefutationBeatsASuspicionAheadOfTheClock(t *testing.T) {
	ids := newIdentities(t, 3)
	victim, liar, other := ids[0], ids[1], ids[2]
	const network = "net"
	// The victim, with the liar as a neighbour (whose session carries
	// the refutation), and another node that holds the victim's
	// heartbeats and takes the suspicion.
	v := newLivenessRig(t, victim, network)
	out := v.neighbour(liar, messages.KindHeartbeats)
	o := newLivenessRig(t, other, network)
	o.writers = []string{victim.ID(), liar.ID(), other.ID()}
	now := uint64(time.Now().UnixMilli())
	hb := &messages.Heartbeat{Writer: victim.ID(), Seq: now - 1000}
	hb.Sig = victim.Sign(messages.HeartbeatSigningBytes(network, victim.ID(), hb.Seq))
	o.run(func(c actor.Context) {
		o.a.hb.writers[victim.ID()], o.a.hb.writers[liar.ID()] = true, true
		o.a.onHeartbeats(c, liar.ID(), []*messages.Heartbeat{hb}, false)
	})
	in := func(s []string) bool { return slices.Contains(s, victim.ID()) }
	o.waitSet("the victim's heartbeat counts it", in)

	s := &messages.Suspicion{Writer: victim.ID(), By: liar.ID(), At: now, Seq: now + uint64((heartbeatMaxAge - 5*time.Second).Milliseconds())}
	s.Sig = liar.Sign(messages.SuspicionSigningBytes(network, s))
	o.run(func(c actor.Context) { o.a.onSuspicions(c, "", []*messages.Suspicion{s}, false) })
	o.waitSet("the suspicion counts the victim out", func(s []string) bool { return !in(s) })
	v.run(func(c actor.Context) { v.a.onSuspicions(c, liar.ID(), []*messages.Suspicion{s}, false) })
	var refutation *messages.Heartbeat
	select {
	case ov := <-out:
		refutation = ov.Heartbeats[0]
	case <-time.After(5 * time.Second):
		t.Fatal("the victim sent no refutation")
	}
	o.run(func(c actor.Context) { o.a.onHeartbeats(c, liar.ID(), []*messages.Heartbeat{refutation}, false) })
	o.waitSet("the refutation counts the victim again", in)
}
