package tunnel

import (
	"os"
	"testing"
	"testing/synctest"
	"time"

	"peerdns/transport"
)

// scriptedStream is a peer stream whose reads follow a script: each step
// returns its bytes, or, when late, waits past the read deadline in force
// (as a thread that waited for a CPU wakes after its timer) and fails it
// without looking at what came, as quic-go's Read does.
type scriptedStream struct {
	transport.Stream
	steps    []scriptStep
	deadline time.Time
	reads    int
}

type scriptStep struct {
	data []byte
	late bool
}

func (s *scriptedStream) Read(p []byte) (int, error) {
	s.reads++
	if len(s.steps) == 0 {
		time.Sleep(time.Until(s.deadline))
		return 0, os.ErrDeadlineExceeded
	}
	st := s.steps[0]
	s.steps = s.steps[1:]
	if st.late {
		time.Sleep(time.Until(s.deadline) + 2*gatherWait)
		return 0, os.ErrDeadlineExceeded
	}
	return copy(p, st.data), nil
}

func (s *scriptedStream) SetReadDeadline(t time.Time) error {
	s.deadline = t
	return nil
}

// A gathering read woken well past its deadline (quic-go then fails it
// before it looks at what came) reads once more, so what arrived while
// the thread waited for a CPU joins the gathered read; a wait that ends
// on time ends the gathering.
func TestGatherReadsAgainAfterALateWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		piece := make([]byte, 8<<10)
		s := &scriptedStream{steps: []scriptStep{{data: piece}, {late: true}, {data: piece}}}
		c := &streamConn{Stream: s}
		buf := make([]byte, 64<<10)
		n, err := c.Read(buf)
		if err != nil || n != 16<<10 {
			t.Fatalf("read %d bytes, %v; want both pieces (%d bytes)", n, err, 16<<10)
		}
		// The read after the late one found nothing more within the
		// gathering wait: four reads in all, none after.
		if s.reads != 4 {
			t.Fatalf("%d stream reads, want 4", s.reads)
		}
		if !s.deadline.IsZero() {
			t.Fatalf("the stream keeps a read deadline %v after the read, want none", s.deadline)
		}
	})
}
