package transport

import (
	"time"

	"peerdns/messages"
)

// A stream path (TCP, relayed) has no close reason of its own: yamux
// ends in a plain end of stream. So a connection closed with
// ReasonReplaced says it in a last control frame, Refuse{Code:
// messages.RefuseReplaced}, and the peer's Recv turns that frame into the
// close error ReplacedByPeer recognises, as QUIC's CONNECTION_CLOSE code
// and an in-memory link's reason are.
//
// The end that closes is closed for its own side at once (Done, Err),
// and leaves the byte stream to the peer to close, for at most
// replacedLinger: closing it right after the frame could lose the frame.
// A TCP close with input left unread sends a reset, and a relayed
// stream's close is an abort, which the relay passes on ahead of bytes it
// still holds. The peer closes as soon as it has read the frame; a peer
// that does not (an older node, a stalled one) is cut at the bound.
//
// A peer that sends this frame closes only its own connection, and gets
// from it no more than a QUIC peer gets from closing with CodeReplaced:
// it is not suspected for that close, and our dials hold off for a
// handshake timeout (actors/peer). So the frame needs no check beyond
// its decoding.

// replacedLinger bounds how long a stream path closed as replaced waits
// for its peer to close the byte stream, and the write of its last frame.
const replacedLinger = 2 * time.Second

// replacedFrame is the last frame of a stream path closed as replaced.
var replacedFrame = func() []byte {
	b, err := EncodeFrame(&messages.Envelope{Kind: messages.KindRefuse, Refuse: &messages.Refuse{Code: messages.RefuseReplaced}})
	if err != nil {
		panic(err) // a fixed envelope that always encodes
	}
	return b
}()

// isReplacedFrame reports whether m is a peer's replaced notice.
func isReplacedFrame(m *messages.Envelope) bool {
	return m.Kind == messages.KindRefuse && m.Refuse != nil && m.Refuse.Code == messages.RefuseReplaced
}

// closeFor closes c for reason, with err as its close error; as
// replaced (ReasonReplaced): closed here now, the peer told why, the
// byte stream closed by the peer or after replacedLinger.
func (c *streamConn) closeFor(reason string, err error) {
	if reason == ReasonReplaced {
		c.end(&closeError{reason: ReasonReplaced}, true)
		return
	}
	c.end(err, false)
}

// hangUp writes the replaced notice after any control write in progress
// and closes the byte stream once the peer has (or at the bound). The
// bound holds whatever the write waits for: a Send before it that waits
// for a peer not reading (up to WriteTimeout), or yamux's send queue; the
// write left waiting fails once the session is closed.
func (c *streamConn) hangUp() {
	bound := time.NewTimer(replacedLinger)
	defer bound.Stop()
	written := make(chan error, 1)
	go func() {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		_ = c.ctrl.SetWriteDeadline(time.Now().Add(replacedLinger))
		_, err := c.ctrl.Write(replacedFrame)
		written <- err
	}()
	select {
	case err := <-written:
		if err == nil {
			select {
			case <-c.sess.CloseChan():
			case <-bound.C:
			}
		}
	case <-bound.C:
	}
	_ = c.sess.Close()
	_ = c.raw.Close()
}
