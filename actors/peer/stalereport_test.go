package peer

import (
	"slices"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// A session replaced by a new connection with the same peer may have
// reported its peer silent (or its stats) just before its stop; the
// report reaches the supervisor after the new session's entry took the
// place. It says nothing of the new session: taken, it marked the new
// entry silent, and a session that is never silent never reports its
// peer heard again, so the peer stayed out of the active set (and the
// quorum) for as long as the new session lasted.
func TestReplacedSessionsReportsIgnored(t *testing.T) {
	r := newSessionsRig(t)
	id := strings.Repeat("7", 64)
	stub := func() *actor.PID { return r.sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {})) }
	old, cur := stub(), stub()
	r.run(func(c actor.Context) {
		r.a.sessions[id] = &sessionEntry{up: true, pid: old}
		r.a.connectedChanged(c)
		// The new connection replaces the old session (onConn).
		r.a.sessions[id] = &sessionEntry{up: true, pid: cur}
		r.a.onSilent(c, &peerSilent{pid: old, id: id, silent: true})
		r.a.onStats(&statsReport{pid: old, id: id, st: sessionStats{sessionCounts: sessionCounts{opsSent: 9}}})
		e := r.a.sessions[id]
		if e.silent || !slices.Contains(r.a.activeIDs(), id) {
			t.Errorf("the replaced session's silence report counted the new session out (silent %v, active %v)", e.silent, shortAll(r.a.activeIDs()))
		}
		if e.stats.opsSent != 0 {
			t.Errorf("the replaced session's stats were taken for the new session's")
		}
		// The current session's own reports still count.
		r.a.onSilent(c, &peerSilent{pid: cur, id: id, silent: true})
		if slices.Contains(r.a.activeIDs(), id) {
			t.Errorf("the current session's silence report did not count its peer out")
		}
	})
}
