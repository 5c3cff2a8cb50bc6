package fleet_test

import (
	"context"
	"encoding/binary"
	"math"
	"net"
	"testing"
	"time"

	"peerdns/agent/fleet"
	"peerdns/messages"
)

type pipeStream struct{ net.Conn }

func (p pipeStream) CloseWrite() error { return nil }
func (p pipeStream) Abort()            { p.Conn.Close() }

// FuzzParentStream feeds one frame body (any bytes) to a parent's stream
// after a valid first batch: it must refuse or store, never panic, and
// never store a point from the future.
func FuzzParentStream(f *testing.F) {
	now := time.Now().Unix()
	seed := func(b *messages.StreamBatch) {
		raw, _ := messages.Marshal(b)
		f.Add(raw)
	}
	seed(&messages.StreamBatch{Seq: 2, Points: []messages.StreamPoints{{Chart: "c", Start: now, Values: [][]float64{{1, 2}}}}})
	seed(&messages.StreamBatch{Seq: 2, Charts: []messages.StreamChart{{ID: "x y", Dims: []string{"a"}}}})
	seed(&messages.StreamBatch{Seq: 2, Points: []messages.StreamPoints{{Chart: "c", Start: now + 1e6, Values: [][]float64{{math.NaN(), 1}}}}})
	seed(&messages.StreamBatch{Seq: 2, Points: []messages.StreamPoints{{Chart: "c", Start: -5, Values: [][]float64{{1}}}}})
	f.Add([]byte{0xff, 0x00})
	f.Fuzz(func(t *testing.T, body []byte) {
		p := fleet.NewParent(fleet.ParentConfig{MaxDims: 100})
		defer p.Close()
		c, stop := streamTo(t, p, 5*time.Second)
		defer stop()
		first := &messages.StreamBatch{Seq: 1, Charts: []messages.StreamChart{{ID: "c", Dims: []string{"a", "b"}}}}
		if err := messages.WriteFrame(c, first, messages.AgentMaxFrame); err != nil {
			t.Fatal(err)
		}
		var ack messages.StreamAck
		if err := messages.ReadFrame(c, &ack, messages.AgentMaxFrame); err != nil || ack.Error != "" {
			t.Fatalf("first ack: %v %q", err, ack.Error)
		}
		hdr := make([]byte, 4)
		binary.BigEndian.PutUint32(hdr, uint32(len(body)))
		if _, err := c.Write(append(hdr, body...)); err != nil {
			return // the parent closed the stream: refused
		}
		_ = messages.ReadFrame(c, &ack, messages.AgentMaxFrame)
		if db, ok := p.DB("k"); ok {
			for _, def := range db.Charts() {
				if last, _, ok := db.Latest(def.ID); ok && last > time.Now().Unix()+60 {
					t.Fatalf("stored a point at %d, in the future", last)
				}
			}
		}
	})
}

// streamTo opens a stream of child "k" to p over a pipe and reads p's
// reply to its hello; stop closes the child's end and waits for p's.
func streamTo(t testing.TB, p *fleet.Parent, within time.Duration) (c net.Conn, stop func()) {
	t.Helper()
	a, c := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.ServeStream(context.Background(), "k", &messages.StreamHello{Hostname: "h", GUID: "g", NodeID: "n"}, pipeStream{a})
	}()
	stop = func() { c.Close(); <-done }
	_ = c.SetDeadline(time.Now().Add(within))
	var rep messages.AgentReply
	if err := messages.ReadFrame(c, &rep, messages.AgentMaxFrame); err != nil {
		stop()
		t.Fatal(err)
	}
	return c, stop
}
