package ws

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/websocket"

	"peerdns/http/httpx"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

// A client's queue is bounded in bytes as well as in messages: log
// snapshots that pile up past MaxQueueBytes drop the client long before
// QueueSize of them are held, while one snapshot larger than the budget
// still goes out when it finds the queue empty.
func TestHubQueueByteBudget(t *testing.T) {
	noLeaks(t)
	sys := quietSystem(t)
	hub := sys.Root.Spawn(Props(slog.New(slog.DiscardHandler), nil))
	t.Cleanup(func() { _ = sys.Root.StopFuture(hub).Wait() })

	newClient := func(id uint64) (*client, <-chan struct{}) {
		dropped := make(chan struct{})
		var once sync.Once
		return &client{id: id, send: make(chan [][]byte, QueueSize), drop: func() { once.Do(func() { close(dropped) }) }}, dropped
	}
	count := func() int {
		r, err := httpx.Ask[*ClientCountReply](sys.Root, hub, &ClientCount{}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return r.N
	}
	snapshot := func(id uint64, size int) {
		sys.Root.Send(hub, &subscribeLog{id: id, channel: "core"})
		sys.Root.Send(hub, &logSnapshot{id: id, channel: "core", snapshot: bytes.Repeat([]byte("x"), size)})
	}

	// One snapshot over the budget, alone in the queue: delivered.
	big, bigDropped := newClient(1)
	sys.Root.Send(hub, &register{c: big})
	snapshot(1, MaxQueueBytes+1<<20)
	if n := count(); n != 1 || len(big.send) != 1 {
		t.Fatalf("clients = %d, queued = %d; want the large snapshot queued to a connected client", n, len(big.send))
	}
	select {
	case <-bigDropped:
		t.Fatal("client dropped for one snapshot that found its queue empty")
	default:
	}

	// A second client that never reads asks for snapshots of 1/3 of the
	// budget: the fourth one takes it past the budget and drops it, far
	// below QueueSize messages.
	slow, slowDropped := newClient(2)
	sys.Root.Send(hub, &register{c: slow})
	for i := 0; i < 4; i++ {
		snapshot(2, MaxQueueBytes/3)
	}
	if n := count(); n != 1 {
		t.Fatalf("clients = %d after the slow client queued %d bytes; want it dropped", n, 4*(MaxQueueBytes/3))
	}
	select {
	case <-slowDropped:
	default:
		t.Fatal("slow client unregistered but its connection not closed")
	}
	if n := len(slow.send); n != 3 {
		t.Fatalf("slow client queue holds %d snapshots when dropped, want 3", n)
	}
}

// End to end: a client that keeps asking for large log snapshots and
// reads nothing is closed by the server as soon as its queue passes the
// byte budget, not only when a write times out (writeWait, 5 s) after
// hundreds of megabytes were queued.
func TestSnapshotFloodDropsClient(t *testing.T) {
	noLeaks(t)
	line := strings.Repeat("y", 1<<20)
	var tails atomic.Int32
	w := newTestWS(t, true, func(d *Deps) {
		big := d.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(*messages.GetLogTail); ok {
				tails.Add(1)
				c.Respond(&messages.GetLogTailReply{Lines: []string{line}})
			}
		}))
		d.Channels = map[string]*actor.PID{"core": big}
	})
	// A small receive buffer, so the server's writes stall at once.
	dialer := &websocket.Dialer{HandshakeTimeout: 5 * time.Second, NetDial: func(network, addr string) (net.Conn, error) {
		c, err := net.Dial(network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		return c, err
	}}
	c, _, err := dialer.Dial("ws://"+w.addr+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w.waitClients(t, 1)
	const asks = 40 // 40 MB of snapshots, well under QueueSize messages
	for i := 0; i < asks; i++ {
		if err := c.WriteJSON(map[string]any{"type": "subscribe-log", "channel": "core", "lines": 5000}); err != nil {
			break // already closed by the server
		}
	}
	// Half of writeWait: a drop by the write deadline comes too late.
	start := time.Now()
	testutil.Eventually(t, writeWait/2, func() error {
		if n := w.clients(t); n != 0 {
			return fmt.Errorf("%d clients after %v (%d tails read); want the flooding client dropped", n, time.Since(start), tails.Load())
		}
		return nil
	})
}
