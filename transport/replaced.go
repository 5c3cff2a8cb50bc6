package transport

import (
	"errors"

	"github.com/quic-go/quic-go"
)

// ReasonReplaced is the reason a node closes a connection with when it
// keeps another connection to the same peer in its place (the two ends
// of a duplicate pick the same one). The peer learns it on every path
// (ReplacedByPeer): QUIC carries it in its CONNECTION_CLOSE
// (CodeReplaced), in-memory links keep the reason, and TCP and relayed
// links, whose byte stream ends with no reason, send it in a last control
// frame (streamreplaced.go).
const ReasonReplaced = "replaced"

// ReplacedByPeer reports whether err, a closed Conn's Err or the error
// its Recv returned, says the peer closed the connection with
// ReasonReplaced: the peer is alive, and the connection it kept in this
// one's place is up or on its way to us.
func ReplacedByPeer(err error) bool {
	var ae *quic.ApplicationError
	if errors.As(err, &ae) {
		return ae.Remote && ae.ErrorCode == CodeReplaced
	}
	var ce *closeError
	return errors.As(err, &ce) && ce.peer && ce.reason == ReasonReplaced
}

// closeError is why an in-memory or stream-path connection closed (a
// stream path only when it closed as replaced): the reason given to
// Close, and whether the other end gave it.
type closeError struct {
	reason string
	peer   bool
}

func (e *closeError) Error() string { return ErrClosed.Error() + ": " + e.reason }
func (e *closeError) Unwrap() error { return ErrClosed }
