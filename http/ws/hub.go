// Package ws is the admin WebSocket (/ws): a hub actor that keeps the set
// of connected clients and fans change hints and log lines out to them.
//
// Each client has a bounded send queue drained by its own writer
// goroutine. The hub never blocks on a client: when a queue is full the
// client is dropped (its connection closed), so one slow reader cannot
// delay the others or the publisher.
//
// The endpoint (conn.go) is served behind the admin API's httpx.Guard and
// checks the upgrade's Origin against the same list; a client without an
// Origin (not a browser) is accepted. Connections are capped
// (Deps.MaxClients, 503 over the cap, answered before the handshake), and
// a client that answers no ping and sends nothing for Deps.ReadTimeout is
// dropped, so a vanished peer does not hold a slot forever.
//
// This package talks to actors through messages/ only.
package ws

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"

	"peerdns/messages"
)

// QueueSize is how many messages a client may have waiting.
const QueueSize = 256

// client is one connection as the hub sees it.
type client struct {
	id    uint64
	send  chan []byte
	drop  func() // closes the connection; safe to call more than once
	logCh string // subscribed log channel, "" = none
}

// register adds a client; unregister removes it.
type register struct{ c *client }
type unregister struct{ id uint64 }

// subscribeLog and unsubscribeLog change a client's log tail. The hub
// queues the snapshot (the log-snapshot message) and starts the live
// lines in one step, so the snapshot always comes first.
type subscribeLog struct {
	id       uint64
	channel  string
	snapshot []byte
}
type unsubscribeLog struct{ id uint64 }

// ClientCount asks the hub how many clients are connected.
type ClientCount struct{}

// ClientCountReply answers ClientCount.
type ClientCountReply struct{ N int }

// Hub is the actor owning the client set.
type Hub struct {
	log     *slog.Logger
	clients map[uint64]*client
	sub     *eventstream.Subscription
}

// Props builds the hub actor.
func Props(log *slog.Logger) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &Hub{log: log} })
}

// Receive handles one message.
func (h *Hub) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		h.clients = map[uint64]*client{}
		self, root := c.Self(), c.ActorSystem().Root
		h.sub = c.ActorSystem().EventStream.Subscribe(func(evt any) {
			switch evt.(type) {
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
	case *register:
		h.clients[m.c.id] = m.c
	case *unregister:
		delete(h.clients, m.id)
	case *subscribeLog:
		if cl := h.clients[m.id]; cl != nil && h.deliver(m.id, cl, m.snapshot) {
			cl.logCh = m.channel
		}
	case *unsubscribeLog:
		if cl := h.clients[m.id]; cl != nil {
			cl.logCh = ""
		}
	case *ClientCount:
		c.Respond(&ClientCountReply{N: len(h.clients)})
	case *messages.Hint:
		h.broadcast(hintJSON(m), "")
	case *messages.LogLine:
		h.broadcast(mustJSON(fileLog{Type: "file-log", Channel: m.Channel, Level: m.Level, Message: m.Message, Timestamp: m.Time.UnixMilli()}), m.Channel)
	}
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

// deliver queues b to cl, or drops cl when its queue is full; it never
// waits. It reports whether cl is still connected.
func (h *Hub) deliver(id uint64, cl *client, b []byte) bool {
	select {
	case cl.send <- b:
		return true
	default:
		h.log.Warn("websocket client too slow, dropped", "client", id)
		delete(h.clients, id)
		cl.drop()
		return false
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
