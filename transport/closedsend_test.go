package transport

import (
	"testing"

	"peerdns/messages"
)

// A connection closed for its own side refuses what comes after, as a
// QUIC or in-memory one does: on a stream path closed as replaced, whose
// byte stream stays open a moment for the notice, a later Send or
// OpenStream must not go out behind or ahead of it.
func TestStreamPathClosedRefusesSendAndOpen(t *testing.T) {
	for _, reason := range []string{ReasonReplaced, "done"} {
		t.Run(reason, func(t *testing.T) {
			a, b := newMulti(t, Options{}), newMulti(t, Options{})
			closer, other := tcpPair(t, b, a)
			defer other.Close("done")
			if err := closer.Close(reason); err != nil {
				t.Fatal(err)
			}
			m := &messages.Envelope{Kind: messages.KindVV}
			if err := closer.Send(m); err == nil {
				t.Errorf("Send after Close(%q) succeeded", reason)
			}
			if s, err := closer.OpenStream(ctxT(t)); err == nil {
				s.Abort()
				t.Errorf("OpenStream after Close(%q) succeeded", reason)
			}
		})
	}
}
