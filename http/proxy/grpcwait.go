package proxy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A gRPC call's answer head is waited for as long as its client said it
// would wait (its grpc-timeout field), when that is longer than
// UpstreamTimeout. A unary call whose server takes a minute to answer,
// from a client with a deadline of two, was otherwise cut by the edge at
// UpstreamTimeout with DEADLINE_EXCEEDED: a deadline the client never
// set, and one nginx (grpc_read_timeout) and Envoy (its route timeout,
// unless max_grpc_timeout is set) impose too. The client's deadline is
// trusted as it comes: it can hold a stream for as long with a streaming
// call anyway, and its upstream connection's PINGs still tell a dead
// upstream (h2.go). Without a grpc-timeout the wait is UpstreamTimeout.
//
// As net/http's ResponseHeaderTimeout, which the gRPC transports do not
// set, the wait starts once the request has been sent whole (a client
// stream's server answers at its end), and not at all when the head
// came first (a bidirectional stream's may).

// errAnswerLate is the cause a call is cancelled with when its answer
// head did not come within its wait.
var errAnswerLate = errors.New("no answer within the call's wait")

// grpcWait is how long r's answer head is waited for once r is sent.
func (s *Server) grpcWait(r *http.Request) time.Duration {
	if d, ok := grpcTimeout(r.Header.Get("Grpc-Timeout")); ok && d > s.d.UpstreamTimeout {
		return d
	}
	return s.d.UpstreamTimeout
}

// grpcUnitLetters are grpc-timeout's units, each standing for the
// duration at its index in grpcUnits.
const grpcUnitLetters = "HMSmun"

var grpcUnits = [len(grpcUnitLetters)]time.Duration{time.Hour, time.Minute, time.Second, time.Millisecond, time.Microsecond, time.Nanosecond}

// grpcTimeout parses a grpc-timeout value: at most 8 digits and a unit
// (H, M, S, m, u, n), as the gRPC over HTTP/2 protocol defines it.
func grpcTimeout(v string) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseUint(v[:len(v)-1], 10, 32)
	if err != nil {
		return 0, false
	}
	i := strings.IndexByte(grpcUnitLetters, v[len(v)-1])
	if i < 0 {
		return 0, false
	}
	unit := grpcUnits[i]
	// 99,999,999 hours is past what a Duration holds.
	if unit == time.Hour && n > uint64(1<<63-1)/uint64(time.Hour) {
		return 1<<63 - 1, true
	}
	return time.Duration(n) * unit, true
}

// headWait cancels a call whose answer head does not come within wait
// of the request's end (sent); the call's trace drives it.
type headWait struct {
	mu     sync.Mutex
	wait   time.Duration
	cancel context.CancelCauseFunc
	timer  *time.Timer
	got    bool
}

// sent starts the wait, unless the head came already.
func (h *headWait) sent() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.got && h.timer == nil {
		h.timer = time.AfterFunc(h.wait, func() { h.cancel(errAnswerLate) })
	}
}

// came ends the wait: the head came (or the call is over).
func (h *headWait) came() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = true
	if h.timer != nil {
		h.timer.Stop()
	}
}
