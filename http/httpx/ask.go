package httpx

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/ask"
)

// ErrBusy reports that an actor did not answer before the deadline (the
// one sentinel of internal/ask, so errors.Is matches either name).
var ErrBusy = ask.ErrBusy

// AskTimeout is the admin deadline for an actor reply; it is shorter than
// the server's write timeout so the client gets an error body.
const AskTimeout = 5 * time.Second

// Ask sends req to pid and waits for a reply of type R (internal/ask,
// which the actor packages' clients use too).
func Ask[R any](root *actor.RootContext, pid *actor.PID, req any, d time.Duration) (R, error) {
	return ask.Reply[R](root, pid, req, d)
}
