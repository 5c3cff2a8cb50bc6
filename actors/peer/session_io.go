package peer

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
	"peerdns/transport"
)

// outItem is one frame for the writer goroutine. closeAfter, when set,
// makes the writer close the connection after this frame (a refusal).
type outItem struct {
	env        *messages.Envelope
	closeAfter string
}

func (s *session) start(c actor.Context) {
	s.started = s.cfg.now()
	s.stats.lastSeen = s.started
	s.out = make(chan outItem, s.cfg.queueSize)
	s.done = make(chan struct{})
	s.credits = make(chan struct{}, opsCredits)
	s.up = make(chan struct{})
	root, self, done, credits, up := c.ActorSystem().Root, c.Self(), s.done, s.credits, s.up
	conn, now, stall := s.cfg.conn, s.cfg.now, &s.stall
	if s.cfg.applied != nil {
		// Ops our ledger applied are skimmed, not decoded: in a burst four
		// in five ops a node receives are such duplicates.
		conn.SkipHeld(s.cfg.applied.Has)
	}
	go func() {
		established := false
		for {
			m, err := conn.Recv()
			select {
			case <-done:
				return // the session stopped and closed the connection
			default:
			}
			if err != nil {
				root.Send(self, &connDown{err: err})
				return
			}
			if m.Kind == messages.KindOps {
				select {
				case credits <- struct{}{}:
				default:
					stall.waiting.Store(true)
					select {
					case credits <- struct{}{}:
					case <-done:
						return
					}
					stall.until.Store(now().UnixNano())
					stall.waiting.Store(false)
				}
			}
			root.Send(self, &frame{m: m})
			if !established && !handshakeKind(m.Kind) {
				// The peer has finished its handshake, we have not (or it
				// breaks the protocol): read nothing more until we have.
				select {
				case <-up:
					established = true
				case <-done:
					return
				}
			}
		}
	}()
	go writeLoop(conn, s.out, s.done)
	h := s.cfg.hello
	s.enqueue(&messages.Envelope{Kind: messages.KindHello, Hello: &h})
}

// handshakeKind says whether a frame of kind may come before the peer's
// session is established on our side. Any other frame the reader hands
// over then is held (the stash) until it is; the reader hands over one
// and waits, so the rest waits unread in the transport's flow control.
// A key nobody invited could otherwise make us decode and hold
// maxStash frames of up to 1 MiB each, many times that once decoded,
// for the whole handshake timeout. An honest peer sends such frames
// only after its accept (it is established on its side), so it loses
// nothing: they are read once we accept it.
func handshakeKind(kind string) bool {
	switch kind {
	case messages.KindHello, messages.KindAccept, messages.KindRefuse, messages.KindPing, messages.KindPong:
		return true
	}
	return false
}

// writeLoop writes queued frames until the session stops or the
// connection dies. Writes can block on flow control; that is why they
// happen here and not in Receive.
func writeLoop(conn transport.Conn, out <-chan outItem, done <-chan struct{}) {
	for {
		select {
		case it := <-out:
			if err := conn.Send(it.env); err != nil {
				_ = conn.Close("write failed")
				return
			}
			if it.closeAfter != "" {
				// Give the peer a moment to read the refusal and hang up
				// itself; closing at once could discard the frame.
				t := time.NewTimer(2 * time.Second)
				select {
				case <-conn.Done():
				case <-done:
				case <-t.C:
				}
				t.Stop()
				_ = conn.Close(it.closeAfter)
				return
			}
		case <-done:
			return
		case <-conn.Done():
			return
		}
	}
}

// enqueue hands a frame to the writer; false when the queue is full.
func (s *session) enqueue(m *messages.Envelope) bool {
	select {
	case s.out <- outItem{env: m}:
		return true
	default:
		s.dropped++
		return false
	}
}

// readStall is the reader's report of waiting for ops credits: while
// it waits, frames the peer sent (its pings among them) sit unread
// because our ledger is behind, not because the peer is silent.
type readStall struct {
	waiting atomic.Bool
	until   atomic.Int64 // when the last wait ended (Unix ns)
}

// heardAt is when the peer was last heard, counting the time our reader
// spent waiting on our ledger as heard: a peer is silent only when
// nothing came while we were reading.
func (s *session) heardAt(now time.Time) time.Time {
	if s.stall.waiting.Load() {
		return now
	}
	if t := time.Unix(0, s.stall.until.Load()); t.After(s.stats.lastSeen) {
		return t
	}
	return s.stats.lastSeen
}

// releaseCredit returns an ops credit to the reader. Stashed frames and
// frames dropped while closing hold none, so never block.
func (s *session) releaseCredit() {
	select {
	case <-s.credits:
	default:
	}
}
