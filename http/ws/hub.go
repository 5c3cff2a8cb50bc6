// Package ws is the admin WebSocket (/ws): a hub actor that keeps the set
// of connected clients and fans change hints and log lines out to them
// (update-health, like update-stats, only to the update-stats
// subscribers).
//
// Each client has a bounded send queue drained by its own writer
// goroutine; a log batch's lines (messages.LogBatch, up to the access
// log's 1024) take one place in it, as one message does. The hub never
// blocks on a client: when a queue is full the client is dropped (its
// connection closed), so one slow reader cannot delay the others or the
// publisher.
//
// The endpoint (conn.go) is served behind the admin API's httpx.Guard and
// checks the upgrade's Origin against the same list; a client without an
// Origin (not a browser) is accepted. Connections are capped
// (Deps.MaxClients, 503 over the cap, answered before the handshake), and
// a client that answers no ping and sends nothing for Deps.ReadTimeout is
// dropped, so a vanished peer does not hold a slot forever. Requests are
// JSON in text or binary messages; a text message that is not UTF-8
// fails the connection with close code 1007 (RFC 6455 §8.1).
//
// This package talks to actors through messages/ only.
package ws

import (
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"

	"peerdns/messages"
)

// QueueSize is how many items a client may have waiting: an item is one
// message, or the lines of one log batch.
const QueueSize = 256

// MaxQueueBytes bounds the bytes waiting in one client's queue (the
// item its writer is sending not counted), and the text of the live
// lines held for it while its snapshot is read. An item that finds the
// queue empty is taken whatever its size, so one large log snapshot
// always goes out; one that would take the waiting bytes past this
// drops the client, as a full queue does. Without it the bound is
// QueueSize messages of any size: a client that asks for log snapshots
// (each up to the size of a log file) and reads slowly held hundreds of
// megabytes of the node's memory per connection.
const MaxQueueBytes = 4 << 20

// client is one connection as the hub sees it.
type client struct {
	id    uint64
	send  chan [][]byte // items: one message, or a log batch's lines
	drop  func()        // closes the connection; safe to call more than once
	logCh string        // subscribed log channel, "" = none
	// While a subscribe-log's snapshot is being read, live lines of the
	// channel wait here (at most MaxQueueBytes, each line counted as its
	// text and heldLineCost; more drop the client) and go out after the
	// snapshot as one item, minus those it already holds.
	pending      []*messages.LogLine
	pendingBytes int64
	waiting      bool
	queued       atomic.Int64 // bytes waiting in send (MaxQueueBytes)
	stats        bool         // subscribed to update-stats (hub's view)
	legacy       bool         // subscribed without a channel: core lines as legacy "log" messages
	statsOn      atomic.Bool  // the same, as the connection's reader sees it
}

// register adds a client; unregister removes it.
type register struct{ c *client }
type unregister struct{ id uint64 }

// subscribeLog, logSnapshot and unsubscribeLog change a client's log
// tail. subscribeLog comes first: from then on the channel's live lines
// are held for the client; then the connection reads the file's tail
// and sends logSnapshot, which the hub queues before the held lines
// whose Seq is past the snapshot's (the others are in the snapshot). So
// no line logged around the subscription is lost or sent twice, and the
// snapshot always comes first.
type subscribeLog struct {
	id      uint64
	channel string
	legacy  bool // the legacy form: lines go out as "log" messages
}
type logSnapshot struct {
	id       uint64
	channel  string
	snapshot []byte
	seq      uint64 // last line in the snapshot
}
type unsubscribeLog struct{ id uint64 }

// subscribeStats and unsubscribeStats turn a client's update-stats on
// and off.
type subscribeStats struct {
	id   uint64
	on   bool
	snap []byte // queued first when on (the stats-snapshot message)
}

// StatsUpdate is one sample's update-stats message (messages.StatsUpdate,
// sent by the stats actor); the hub queues the same bytes to every
// subscriber.
type StatsUpdate = messages.StatsUpdate

// ClientCount asks the hub how many clients are connected.
type ClientCount struct{}

// ClientCountReply answers ClientCount.
type ClientCountReply struct{ N int }

// Hub is the actor owning the client set.
type Hub struct {
	log      *slog.Logger
	clients  map[uint64]*client
	sub      *eventstream.Subscription
	watching func(int) // told the update-stats subscribers' count
}

// Props builds the hub actor. watching, if not nil, is told the number
// of update-stats subscribers whenever it may have changed (the stats
// sampler samples every second only while someone reads it).
func Props(log *slog.Logger, watching func(int)) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &Hub{log: log, watching: watching} })
}

// countWatchers tells watching how many clients take update-stats. It
// runs whenever that set may change: a subscription set or cleared, a
// client gone (unregister, slowDrop), the hub stopping.
func (h *Hub) countWatchers() {
	if h.watching == nil {
		return
	}
	n := 0
	for _, cl := range h.clients {
		if cl.stats {
			n++
		}
	}
	h.watching(n)
}

// Receive handles one message.
func (h *Hub) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		h.clients = map[uint64]*client{}
		self, root := c.Self(), c.ActorSystem().Root
		h.sub = c.ActorSystem().EventStream.Subscribe(func(evt any) {
			switch m := evt.(type) {
			case *messages.LogBatch:
				m.Retain() // released in Receive
				root.Send(self, evt)
			case *messages.Hint, *messages.LogLine:
				root.Send(self, evt)
			}
		})
	case *actor.Stopping, *actor.Restarting:
		if h.sub != nil {
			c.ActorSystem().EventStream.Unsubscribe(h.sub)
			h.sub = nil
		}
		for _, cl := range h.clients {
			cl.drop()
		}
		h.clients = map[uint64]*client{}
		h.countWatchers()
	case *register:
		h.clients[m.c.id] = m.c
	case *unregister:
		if cl := h.clients[m.id]; cl != nil {
			delete(h.clients, m.id)
			if cl.stats {
				h.countWatchers()
			}
		}
	case *subscribeLog:
		if cl := h.clients[m.id]; cl != nil {
			cl.logCh, cl.waiting, cl.pending, cl.pendingBytes, cl.legacy = m.channel, true, nil, 0, m.legacy
		}
	case *logSnapshot:
		cl := h.clients[m.id]
		if cl == nil || cl.logCh != m.channel || !cl.waiting {
			return // unsubscribed or subscribed elsewhere meanwhile
		}
		held := cl.pending
		cl.waiting, cl.pending, cl.pendingBytes = false, nil, 0
		if !h.deliver(m.id, cl, m.snapshot) {
			return
		}
		var after [][]byte
		for _, l := range held {
			if l.Seq > m.seq {
				after = append(after, lineJSON(l, cl.legacy))
			}
		}
		if len(after) > 0 {
			h.deliver(m.id, cl, after...)
		}
	case *unsubscribeLog:
		if cl := h.clients[m.id]; cl != nil {
			cl.logCh, cl.waiting, cl.pending, cl.pendingBytes = "", false, nil, 0
		}
	case *subscribeStats:
		cl := h.clients[m.id]
		if cl == nil {
			return
		}
		if m.snap != nil && !h.deliver(m.id, cl, m.snap) {
			return
		}
		if cl.stats != m.on {
			cl.stats = m.on
			h.countWatchers()
		}
	case *StatsUpdate:
		h.toStats(m.Payload)
	case *ClientCount:
		c.Respond(&ClientCountReply{N: len(h.clients)})
	case *messages.Hint:
		if m.Type == messages.HintHealth {
			h.toStats(hintJSON(m))
			return
		}
		h.broadcast(hintJSON(m), "")
	case *messages.LogLine:
		h.broadcastLines([]*messages.LogLine{m})
	case *messages.LogBatch:
		defer m.Release()
		if m.Len() == 0 || !h.tailing(m.Channel) {
			return
		}
		h.broadcastLines(m.Lines())
	}
}

// lineJSON is a live line as a file-log message, or as the legacy log
// message (the same fields, type "log").
func lineJSON(m *messages.LogLine, legacy bool) []byte {
	typ := "file-log"
	if legacy {
		typ = "log"
	}
	return mustJSON(fileLog{Type: typ, Channel: m.Channel, Level: m.Level, Message: m.Message, Timestamp: m.Time.UnixMilli()})
}

// tailing reports whether a client takes channel's lines (a batch's
// lines are all of one channel).
func (h *Hub) tailing(channel string) bool {
	for _, cl := range h.clients {
		if cl.logCh == channel {
			return true
		}
	}
	return false
}

// heldLineCost is what a held line counts against MaxQueueBytes besides
// its text (the LogLine and its place in pending).
const heldLineCost = 128

// broadcastLines sends live lines of one channel (one line, or a batch's)
// to the channel's subscribers as one queue item, or holds them for
// those whose snapshot is being read.
func (h *Hub) broadcastLines(lines []*messages.LogLine) {
	var msgs, legacy [][]byte
	for id, cl := range h.clients {
		if cl.logCh != lines[0].Channel {
			continue
		}
		if cl.waiting {
			for _, l := range lines {
				cl.pendingBytes += int64(len(l.Message)) + heldLineCost
			}
			if cl.pendingBytes > MaxQueueBytes {
				h.slowDrop(id, cl)
				continue
			}
			cl.pending = append(cl.pending, lines...)
			continue
		}
		if cl.legacy {
			if legacy == nil {
				legacy = linesJSON(lines, true)
			}
			h.deliver(id, cl, legacy...)
			continue
		}
		if msgs == nil {
			msgs = linesJSON(lines, false)
		}
		h.deliver(id, cl, msgs...)
	}
}

// linesJSON is lineJSON of each line.
func linesJSON(lines []*messages.LogLine, legacy bool) [][]byte {
	out := make([][]byte, len(lines))
	for i, l := range lines {
		out[i] = lineJSON(l, legacy)
	}
	return out
}

// broadcast queues b to every client (only the subscribers of logChannel
// when it is set), dropping clients whose queue is full.
func (h *Hub) broadcast(b []byte, logChannel string) {
	for id, cl := range h.clients {
		if logChannel != "" && cl.logCh != logChannel {
			continue
		}
		h.deliver(id, cl, b)
	}
}

// toStats queues b to the update-stats subscribers.
func (h *Hub) toStats(b []byte) {
	for id, cl := range h.clients {
		if cl.stats {
			h.deliver(id, cl, b)
		}
	}
}

// deliver queues msgs to cl as one item, or drops cl when its queue is
// full; it never waits. It reports whether cl is still connected.
func (h *Hub) deliver(id uint64, cl *client, msgs ...[]byte) bool {
	if !cl.offer(msgs...) {
		h.slowDrop(id, cl)
		return false
	}
	return true
}

// offer queues msgs as one item without waiting. It reports false when
// the queue is full: QueueSize items, or MaxQueueBytes waiting with msgs
// (unless they find the queue empty).
func (cl *client) offer(msgs ...[]byte) bool {
	n := itemBytes(msgs)
	if q := cl.queued.Add(n); q > n && q > MaxQueueBytes {
		cl.queued.Add(-n)
		return false
	}
	select {
	case cl.send <- msgs:
		return true
	default:
		cl.queued.Add(-n)
		return false
	}
}

// taken is told of each item the writer takes off the queue.
func (cl *client) taken(msgs [][]byte) { cl.queued.Add(-itemBytes(msgs)) }

func itemBytes(msgs [][]byte) int64 {
	var n int64
	for _, b := range msgs {
		n += int64(len(b))
	}
	return n
}

// slowDrop drops cl, a client too slow to take what the hub queues.
func (h *Hub) slowDrop(id uint64, cl *client) {
	h.log.Warn("websocket client too slow, dropped", "client", id)
	delete(h.clients, id)
	cl.drop()
	if cl.stats {
		h.countWatchers()
	}
}

// fileLog is the file-log message: one live line of a subscribed channel.
type fileLog struct {
	Type      string `json:"type"`
	Channel   string `json:"channel"`
	Level     string `json:"level"`
	Message   string `json:"message"`
	Timestamp int64  `json:"timestamp"` // ms
}

// hintJSON is {"type": ..., "timestamp": ms, ...Data}: the payload fields
// vary per hint, so a map.
func hintJSON(m *messages.Hint) []byte {
	out := map[string]any{"type": m.Type, "timestamp": time.Now().UnixMilli()}
	for k, v := range m.Data {
		out[k] = v
	}
	return mustJSON(out)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain structs and maps of JSON values reach here.
		b, _ = json.Marshal(map[string]string{"type": "error", "message": err.Error()})
	}
	return b
}
