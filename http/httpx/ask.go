package httpx

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// ErrBusy reports that an actor did not answer before the deadline.
var ErrBusy = errors.New("actor did not answer in time")

// AskTimeout is the admin deadline for an actor reply; it is shorter than
// the server's write timeout so the client gets an error body.
const AskTimeout = 5 * time.Second

// Ask sends req to pid and waits for a reply of type R.
func Ask[R any](root *actor.RootContext, pid *actor.PID, req any, d time.Duration) (R, error) {
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
