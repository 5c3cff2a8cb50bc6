package ws

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/logchan"
	"peerdns/messages"
)

// A subscribe-log while the channel is busy loses no line and repeats
// none: the snapshot's lines and then the live ones are one unbroken run,
// whether the lines come one by one or in batches (the access log's
// messages.LogBatch, published as one event).
func TestLogSubscriptionUnderLoad(t *testing.T) {
	t.Run("lines", func(t *testing.T) { testLogSubscriptionUnderLoad(t, 1) })
	t.Run("batches", func(t *testing.T) { testLogSubscriptionUnderLoad(t, 7) })
}

func testLogSubscriptionUnderLoad(t *testing.T, batch int) {
	noLeaks(t)
	dir := t.TempDir()
	var core *actor.PID
	w := newTestWS(t, true, func(d *Deps) {
		core = d.Root.Spawn(logchan.Props("core", dir))
		d.Channels = map[string]*actor.PID{"core": core}
	})
	t.Cleanup(func() { _ = w.sys.Root.StopFuture(core).Wait() })
	c := w.mustDial(t, "")
	w.waitClients(t, 1)

	const total = 3000
	// The writer keeps at most `ahead` lines in front of what the client
	// read (a WebSocket client that falls 256 messages behind is dropped
	// by design): lines keep coming while the subscription is set up,
	// without flooding the client.
	const ahead = 100
	var read atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		var b *messages.LogBatch
		for i := 1; i <= total; i++ {
			for int64(i) > read.Load()+ahead && i > 300 {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
			select {
			case <-stop:
				return
			default:
			}
			text := fmt.Sprintf("line-%06d", i)
			if batch == 1 {
				w.sys.Root.Send(core, &messages.LogLine{Channel: "core", Level: "INFO", Time: time.Now(), Message: text})
				continue
			}
			if b == nil {
				b = messages.NewLogBatch("core", "INFO")
			}
			b.Text = append(b.Text, text...)
			if b.EndLine(time.Now()); b.Len() == batch || i == total {
				w.sys.Root.Send(core, b)
				b = nil
			}
		}
	}()
	// Subscribe once the channel is well under way.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := w.sys.Root.RequestFuture(core, &messages.GetLogTail{Lines: 1}, time.Second).Result()
		if err == nil && r.(*messages.GetLogTailReply).Seq >= 290 { // 300 less a batch
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the channel never got under way")
		}
	}
	read.Store(300)
	send(t, c, msg{"type": "subscribe-log", "channel": "core", "lines": 100})
	snap := next(t, c)
	if snap["type"] != "log-snapshot" {
		t.Fatalf("first message %v", snap)
	}
	var got []int
	for _, l := range snap["lines"].([]any) {
		var n int
		fmt.Sscanf(l.(string), "line-%d", &n)
		got = append(got, n)
	}
	read.Store(int64(got[len(got)-1]))
	for got[len(got)-1] < total {
		m := next(t, c)
		if m["type"] != "file-log" {
			t.Fatalf("message %v", m)
		}
		var n int
		fmt.Sscanf(m["message"].(string), "line-%d", &n)
		got = append(got, n)
		read.Store(int64(n))
	}
	if !sort.IntsAreSorted(got) {
		t.Fatalf("out of order: %v", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1]+1 {
			t.Fatalf("after line %d came %d (snapshot of %d lines, %d in all): %s", got[i-1], got[i], len(snap["lines"].([]any)), len(got), strings.Trim(fmt.Sprint(got[max(0, i-3):min(len(got), i+3)]), "[]"))
		}
	}
}

// The legacy subscribe-log without a channel gets the core channel's
// lines as "log" messages.
func TestLegacyLogMessages(t *testing.T) {
	noLeaks(t)
	w := newTestWS(t, true, nil)
	c := w.mustDial(t, "")
	w.waitClients(t, 1)
	send(t, c, msg{"type": "subscribe-log"})
	if m := next(t, c); m["type"] != "log-snapshot" || m["channel"] != "core" {
		t.Fatalf("snapshot: %v", m)
	}
	w.sys.EventStream.Publish(&messages.LogLine{Channel: "core", Level: "INFO", Time: time.Now(), Message: "legacy line"})
	if m := next(t, c); m["type"] != "log" || m["message"] != "legacy line" {
		t.Fatalf("legacy line: %v", m)
	}
}
