// Package ask is the one way the node asks an actor from outside the
// actor system and waits for its typed reply: HTTP handlers (through
// http/httpx.Ask) and the clients actor packages hand to them (the
// backups actor's Client) share it, so a timeout is one error and a reply
// of the wrong type one message everywhere.
//
// It lives in internal/ because both sides may import it: http/ never
// imports actors/, actors/ never import http/. It must never be called
// from inside an actor's Receive (that blocks the mailbox; asking
// yourself or a cycle deadlocks): an actor uses Context.Request and
// handles the reply.
package ask

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// ErrBusy reports that an actor did not answer before the deadline.
var ErrBusy = errors.New("actor did not answer in time")

// Reply sends req to pid and waits up to d for a reply of type R. A
// timeout is ErrBusy; a reply of another type is an error naming both
// types.
func Reply[R any](root *actor.RootContext, pid *actor.PID, req any, d time.Duration) (R, error) {
	var zero R
	res, err := root.RequestFuture(pid, req, d).Result()
	if errors.Is(err, actor.ErrTimeout) {
		return zero, ErrBusy
	}
	if err != nil {
		return zero, err
	}
	r, ok := res.(R)
	if !ok {
		return zero, fmt.Errorf("ask %T: unexpected reply %T", req, res)
	}
	return r, nil
}
