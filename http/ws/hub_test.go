package ws

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/http/httpx"
	"peerdns/messages"
)

// A client whose queue is full is dropped at once; the hub goes on
// serving the others and answering questions, never waiting for it.
func TestHubDropsSlowClientWithoutBlocking(t *testing.T) {
	noLeaks(t)
	sys := quietSystem(t)
	hub := sys.Root.Spawn(Props(slog.New(slog.DiscardHandler), nil))
	t.Cleanup(func() { _ = sys.Root.StopFuture(hub).Wait() })

	// The slow client's queue is never drained.
	dropped := make(chan struct{})
	var once sync.Once
	slow := &client{id: 1, send: make(chan [][]byte, QueueSize), drop: func() { once.Do(func() { close(dropped) }) }}
	// The other client has room for everything (as if it kept up).
	const total = QueueSize + 50
	var fastDropped atomic.Bool // the hub drops everyone as it stops, at cleanup
	fast := &client{id: 2, send: make(chan [][]byte, total), drop: func() { fastDropped.Store(true) }}
	sys.Root.Send(hub, &register{c: slow})
	sys.Root.Send(hub, &register{c: fast})
	// A barrier: the hub has started (and subscribed to the event stream)
	// and holds both clients before anything is published.
	if r, err := httpx.Ask[*ClientCountReply](sys.Root, hub, &ClientCount{}, 5*time.Second); err != nil || r.N != 2 {
		t.Fatalf("ClientCount = %v, %v; want 2", r, err)
	}

	for i := 1; i <= total; i++ {
		sys.EventStream.Publish(&messages.Hint{Type: "test-hint", Data: map[string]any{"seq": i}})
	}
	select {
	case <-dropped:
	case <-time.After(10 * time.Second):
		t.Fatal("slow client not dropped")
	}
	r, err := httpx.Ask[*ClientCountReply](sys.Root, hub, &ClientCount{}, 5*time.Second)
	if err != nil || r.N != 1 || fastDropped.Load() {
		t.Fatalf("ClientCount = %v, %v, fast client dropped %v; want 1 (the fast client)", r, err, fastDropped.Load())
	}
	// ClientCount was handled after every hint, so all are queued.
	for i := 1; i <= total; i++ {
		var m struct{ Seq int }
		select {
		case item := <-fast.send:
			var b []byte
			if len(item) == 1 {
				b = item[0]
			}
			if err := json.Unmarshal(b, &m); err != nil || m.Seq != i {
				t.Fatalf("fast client message %d = %s (%v): lost or reordered", i, b, err)
			}
		default:
			t.Fatalf("fast client got only %d of %d hints", i-1, total)
		}
	}
	if n := len(slow.send); n != QueueSize {
		t.Fatalf("slow queue holds %d, want it full (%d) when dropped", n, QueueSize)
	}
}

func TestHintJSON(t *testing.T) {
	b := hintJSON(&messages.Hint{Type: messages.HintDatabase, Data: map[string]any{"domain": "a.p2p"}})
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["type"] != messages.HintDatabase || m["domain"] != "a.p2p" || fmt.Sprint(m["timestamp"]) == "" {
		t.Fatalf("hintJSON = %s", b)
	}
}

// The hub tells how many clients take update-stats as they subscribe,
// unsubscribe, leave, and are dropped for not keeping up with updates.
func TestHubCountsStatsWatchers(t *testing.T) {
	noLeaks(t)
	sys := quietSystem(t)
	var watching atomic.Int64
	watching.Store(-1)
	hub := sys.Root.Spawn(Props(slog.New(slog.DiscardHandler), func(n int) { watching.Store(int64(n)) }))
	t.Cleanup(func() { _ = sys.Root.StopFuture(hub).Wait() })
	barrier := func(want int64) {
		t.Helper()
		if _, err := httpx.Ask[*ClientCountReply](sys.Root, hub, &ClientCount{}, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if n := watching.Load(); n != want {
			t.Fatalf("watching %d, want %d", n, want)
		}
	}
	a := &client{id: 1, send: make(chan [][]byte, QueueSize), drop: func() {}}
	b := &client{id: 2, send: make(chan [][]byte, 1), drop: func() {}} // takes one message
	sys.Root.Send(hub, &register{c: a})
	sys.Root.Send(hub, &register{c: b})
	sys.Root.Send(hub, &subscribeStats{id: 1, on: true})
	sys.Root.Send(hub, &subscribeStats{id: 2, on: true})
	barrier(2)
	sys.Root.Send(hub, &subscribeStats{id: 1, on: false})
	barrier(1)
	sys.Root.Send(hub, &subscribeStats{id: 1, on: true})
	barrier(2)
	// b's queue fills with the first update and the second drops it.
	sys.Root.Send(hub, &StatsUpdate{Payload: []byte(`{}`)})
	sys.Root.Send(hub, &StatsUpdate{Payload: []byte(`{}`)})
	barrier(1)
	sys.Root.Send(hub, &unregister{id: 1})
	barrier(0)
}

// update-health is for the diagnostics (update-stats) subscribers only;
// every other hint goes to every client.
func TestHealthHintOnlyToStatsSubscribers(t *testing.T) {
	w := newTestWS(t, false, func(d *Deps) {
		d.Stats = func(int) ([]byte, error) { return []byte(`{"type":"stats-snapshot"}`), nil }
	})
	sub, other := w.mustDial(t, ""), w.mustDial(t, "")
	w.waitClients(t, 2)
	send(t, sub, msg{"type": "subscribe-stats"})
	// The hub queued the snapshot and subscribed the client in one step.
	if m := next(t, sub); m["type"] != "stats-snapshot" {
		t.Fatalf("after subscribe-stats: %v", m)
	}
	w.sys.EventStream.Publish(&messages.Hint{Type: messages.HintHealth, Data: map[string]any{"status": "degraded"}})
	w.sys.EventStream.Publish(&messages.Hint{Type: messages.HintPeers})
	if m := next(t, sub); m["type"] != messages.HintHealth || m["status"] != "degraded" {
		t.Fatalf("stats subscriber got %v, want update-health", m)
	}
	if m := next(t, sub); m["type"] != messages.HintPeers {
		t.Fatalf("stats subscriber got %v, want update-peers", m)
	}
	if m := next(t, other); m["type"] != messages.HintPeers {
		t.Fatalf("client without update-stats got %v before update-peers, want no update-health", m)
	}
}
