package ws

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/actors/logchan"
	"peerdns/http/httpx"
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

// A batch of more lines than QueueSize (the edge's access log hands its
// channel up to 1024 lines at once) reaches a subscriber that reads as
// fast as it can, line by line: the batch is queued as one item, not as
// more messages than the queue holds, which dropped every subscriber of
// a busy channel however fast it read.
func TestLargeLogBatchReachesSubscriber(t *testing.T) {
	noLeaks(t)
	w := newTestWS(t, true, nil)
	c := w.mustDial(t, "")
	w.waitClients(t, 1)
	send(t, c, msg{"type": "subscribe-log", "channel": "core"})
	if m := next(t, c); m["type"] != "log-snapshot" {
		t.Fatalf("snapshot: %v", m)
	}
	const lines = 4 * QueueSize
	b := messages.NewLogBatch("core", "INFO")
	for i := 1; i <= lines; i++ {
		b.Text = fmt.Appendf(b.Text, "line-%06d", i)
		b.EndLine(time.Now())
	}
	b.Seq = 1
	w.sys.EventStream.Publish(b)
	b.Release()
	for i := 1; i <= lines; i++ {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, data, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("after %d of %d lines: %v", i-1, lines, err)
		}
		var m msg
		if err := json.Unmarshal(data, &m); err != nil || m["type"] != "file-log" || m["message"] != fmt.Sprintf("line-%06d", i) {
			t.Fatalf("line %d: %s", i, data)
		}
	}
	if n := w.clients(t); n != 1 {
		t.Fatalf("%d clients after the batch, want 1", n)
	}
}

// The same batch arriving while a subscriber's snapshot is read is held
// for it, and follows the snapshot as one item.
func TestLargeLogBatchHeldDuringSnapshot(t *testing.T) {
	noLeaks(t)
	sys := quietSystem(t)
	hub := sys.Root.Spawn(Props(slog.New(slog.DiscardHandler), nil))
	t.Cleanup(func() { _ = sys.Root.StopFuture(hub).Wait() })
	var dropped atomic.Bool
	cl := &client{id: 1, send: make(chan [][]byte, QueueSize), drop: func() { dropped.Store(true) }}
	sys.Root.Send(hub, &register{c: cl})
	if r, err := httpx.Ask[*ClientCountReply](sys.Root, hub, &ClientCount{}, 5*time.Second); err != nil || r.N != 1 {
		t.Fatalf("ClientCount = %v, %v; want 1", r, err)
	}

	const lines = 4 * QueueSize
	sys.Root.Send(hub, &subscribeLog{id: 1, channel: "core"})
	b := messages.NewLogBatch("core", "INFO")
	for i := 1; i <= lines; i++ {
		b.Text = fmt.Appendf(b.Text, "line-%06d", i)
		b.EndLine(time.Now())
	}
	b.Seq = 1
	sys.EventStream.Publish(b) // the hub takes it before the snapshot
	b.Release()
	sys.Root.Send(hub, &logSnapshot{id: 1, channel: "core", snapshot: []byte(`{"type":"log-snapshot"}`), seq: 10})
	if r, err := httpx.Ask[*ClientCountReply](sys.Root, hub, &ClientCount{}, 5*time.Second); err != nil || r.N != 1 || dropped.Load() {
		t.Fatalf("ClientCount = %v, %v, dropped %v; want the subscriber kept", r, err, dropped.Load())
	}
	if n := len(cl.send); n != 2 {
		t.Fatalf("%d items queued, want the snapshot and the held lines", n)
	}
	<-cl.send
	held := <-cl.send
	if len(held) != lines-10 || !strings.Contains(string(held[0]), "line-000011") {
		t.Fatalf("%d held lines after the snapshot, the first %s; want %d from line 11", len(held), held[0], lines-10)
	}

	// What is held stays within MaxQueueBytes: past it the client is
	// dropped, before its snapshot comes.
	sys.Root.Send(hub, &subscribeLog{id: 1, channel: "core"})
	long := strings.Repeat("z", 1<<10)
	for held := 0; held <= MaxQueueBytes; held += lines * len(long) {
		b := messages.NewLogBatch("core", "INFO")
		for i := 0; i < lines; i++ {
			b.Text = append(b.Text, long...)
			b.EndLine(time.Now())
		}
		sys.EventStream.Publish(b)
		b.Release()
	}
	if r, err := httpx.Ask[*ClientCountReply](sys.Root, hub, &ClientCount{}, 5*time.Second); err != nil || r.N != 0 || !dropped.Load() {
		t.Fatalf("ClientCount = %v, %v, dropped %v; want the subscriber dropped once it holds over MaxQueueBytes", r, err, dropped.Load())
	}
}
