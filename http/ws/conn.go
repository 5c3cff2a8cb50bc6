package ws

import (
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"peerdns/actors/logchan"
	"peerdns/http/httpx"
	"peerdns/messages"
)

// Deps are what the /ws endpoint needs.
type Deps struct {
	Root     *actor.RootContext
	Hub      *actor.PID
	Ledger   *actor.PID
	Channels map[string]*actor.PID // log channel id → channel actor
	Log      *slog.Logger
}

// Limits of a client connection.
const (
	writeWait    = 5 * time.Second
	pingInterval = 30 * time.Second
	maxMessage   = 64 << 10
)

var nextID atomic.Uint64

// Handler upgrades GET /ws and serves one client.
func Handler(d Deps) fasthttp.RequestHandler {
	up := websocket.FastHTTPUpgrader{
		ReadBufferSize: 4096, WriteBufferSize: 4096,
		// The admin API has no authentication and binds loopback; any
		// origin that can reach it may watch its hints (spec: no auth).
		CheckOrigin: func(*fasthttp.RequestCtx) bool { return true },
	}
	return func(ctx *fasthttp.RequestCtx) {
		err := up.Upgrade(ctx, func(conn *websocket.Conn) { serve(d, conn) })
		if err != nil {
			d.Log.Debug("websocket upgrade failed", "err", err)
		}
	}
}

// serve runs one client: a writer goroutine drains its queue, this
// goroutine reads requests.
func serve(d Deps, conn *websocket.Conn) {
	var once sync.Once
	cl := &client{id: nextID.Add(1), send: make(chan []byte, QueueSize)}
	done := make(chan struct{})
	cl.drop = func() { once.Do(func() { close(done); _ = conn.Close() }) }
	d.Root.Send(d.Hub, &register{c: cl})
	defer func() {
		d.Root.Send(d.Hub, &unregister{id: cl.id})
		cl.drop()
	}()
	go writer(conn, cl, done)

	conn.SetReadLimit(maxMessage)
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		var req struct {
			Type    string `json:"type"`
			Channel string `json:"channel"`
			Lines   int    `json:"lines"`
		}
		if err := json.Unmarshal(data, &req); err != nil {
			enqueue(cl, mustJSON(map[string]any{"type": "error", "message": "invalid JSON: " + err.Error()}))
			continue
		}
		switch req.Type {
		case "request-domains":
			r, err := httpx.Ask[*messages.GetDomainsReply](d.Root, d.Ledger, &messages.GetDomains{}, httpx.AskTimeout)
			if err != nil {
				enqueue(cl, mustJSON(map[string]any{"type": "error", "message": "domains: " + err.Error()}))
				continue
			}
			enqueue(cl, mustJSON(map[string]any{"type": "domains-list", "domains": r.Domains}))
		case "subscribe-log":
			pid, ok := d.Channels[req.Channel]
			if !ok {
				enqueue(cl, mustJSON(map[string]any{"type": "error", "message": "unknown log channel: " + req.Channel}))
				continue
			}
			n := req.Lines
			if n <= 0 {
				n = logchan.DefaultLines
			}
			if n > logchan.MaxLines {
				n = logchan.MaxLines
			}
			r, err := httpx.Ask[*logchan.TailReply](d.Root, pid, &logchan.Tail{Lines: n}, httpx.AskTimeout)
			if err == nil {
				err = r.Err
			}
			if err != nil {
				enqueue(cl, mustJSON(map[string]any{"type": "error", "message": "log tail: " + err.Error()}))
				continue
			}
			enqueue(cl, mustJSON(map[string]any{"type": "log-snapshot", "channel": req.Channel, "lines": r.Lines}))
			d.Root.Send(d.Hub, &subscribeLog{id: cl.id, channel: req.Channel})
		case "unsubscribe-log":
			d.Root.Send(d.Hub, &unsubscribeLog{id: cl.id})
		default:
			enqueue(cl, mustJSON(map[string]any{"type": "error", "message": "unknown message type: " + req.Type}))
		}
	}
}

// enqueue adds a reply to the client's own queue; a client that does not
// drain its queue is dropped, as for broadcasts.
func enqueue(cl *client, b []byte) {
	select {
	case cl.send <- b:
	default:
		cl.drop()
	}
}

func writer(conn *websocket.Conn, cl *client, done <-chan struct{}) {
	ping := time.NewTicker(pingInterval)
	defer ping.Stop()
	for {
		select {
		case <-done:
			return
		case b := <-cl.send:
			_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
			if err := conn.WriteMessage(websocket.TextMessage, b); err != nil {
				cl.drop()
				return
			}
		case <-ping.C:
			_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
			if err := conn.WriteMessage(websocket.PingMessage, nil); err != nil {
				cl.drop()
				return
			}
		}
	}
}
