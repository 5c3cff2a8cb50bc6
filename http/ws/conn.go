package ws

import (
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
	"peerdns/messages"
)

// Deps are what the /ws endpoint needs. The zero limits take the
// defaults below; tests set small ones.
type Deps struct {
	Root     *actor.RootContext
	Hub      *actor.PID
	Ledger   *actor.PID
	Channels map[string]*actor.PID // log channel id → channel actor
	Log      *slog.Logger
	// Stats builds the stats-snapshot message for minutes of history;
	// nil: the stats requests answer an error.
	Stats func(minutes int) ([]byte, error)

	// MaxClients caps the open connections; an upgrade over the cap is
	// answered 503 before the handshake.
	MaxClients int
	// ReadTimeout drops a client that sent nothing, not even a pong, for
	// this long: a peer that vanished without closing its TCP connection.
	ReadTimeout time.Duration
	// PingInterval is how often the server pings. It must be shorter than
	// ReadTimeout (otherwise ReadTimeout/2 is used), so a live client's
	// pong always arrives before its deadline.
	PingInterval time.Duration
}

// Defaults of the Deps limits.
const (
	DefaultMaxClients   = 256
	DefaultReadTimeout  = 60 * time.Second
	DefaultPingInterval = 25 * time.Second
)

// Limits of one message.
const (
	writeWait  = 5 * time.Second
	maxMessage = 64 << 10
)

var nextID atomic.Uint64

func (d Deps) withDefaults() Deps {
	if d.MaxClients <= 0 {
		d.MaxClients = DefaultMaxClients
	}
	if d.ReadTimeout <= 0 {
		d.ReadTimeout = DefaultReadTimeout
	}
	if d.PingInterval <= 0 {
		d.PingInterval = DefaultPingInterval
	}
	if d.PingInterval >= d.ReadTimeout {
		d.PingInterval = d.ReadTimeout / 2
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	return d
}

// Handler upgrades GET /ws and serves one client. Serve it behind an
// httpx.Guard (the admin server does): the upgrade's Origin is checked
// against the list of the guard that admitted the request; a client that
// sends no Origin (the CLI, scripts) is accepted, and without a guard so
// is nothing else.
func Handler(d Deps) fasthttp.RequestHandler {
	d = d.withDefaults()
	var open atomic.Int64
	up := websocket.FastHTTPUpgrader{
		ReadBufferSize: 4096, WriteBufferSize: 4096,
		CheckOrigin: originAllowed,
	}
	return func(ctx *fasthttp.RequestCtx) {
		if !originAllowed(ctx) {
			httpx.WriteError(ctx, nil, httpx.Errorf(fasthttp.StatusForbidden,
				"WebSocket from origin %q refused", ctx.Request.Header.Peek("Origin")))
			return
		}
		// A cheap early answer; the hard cap is the Add below, since two
		// upgrades may pass this check at once.
		if open.Load() >= int64(d.MaxClients) {
			d.Log.Debug("websocket client refused: too many clients", "max", d.MaxClients)
			httpx.WriteError(ctx, nil, httpx.Errorf(fasthttp.StatusServiceUnavailable,
				"too many WebSocket clients (%d); try again later", d.MaxClients))
			return
		}
		err := up.Upgrade(ctx, func(conn *websocket.Conn) {
			defer open.Add(-1)
			if open.Add(1) > int64(d.MaxClients) {
				msg := websocket.FormatCloseMessage(websocket.CloseTryAgainLater, "too many clients")
				_ = conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(writeWait))
				_ = conn.Close()
				return
			}
			serve(d, conn)
		})
		if err != nil {
			d.Log.Debug("websocket upgrade failed", "err", err)
		}
	}
}

// originAllowed: no Origin (not a browser), or an Origin the admitting
// guard allows.
func originAllowed(ctx *fasthttp.RequestCtx) bool {
	origin := ctx.Request.Header.Peek("Origin")
	if len(origin) == 0 {
		return true
	}
	g := httpx.GuardOf(ctx)
	return g != nil && g.OriginAllowed(string(origin))
}

// request is a client message.
type request struct {
	Type    string `json:"type"`
	Channel string `json:"channel"`
	Lines   int    `json:"lines"`
	Minutes int    `json:"minutes"` // subscribe-stats: history to include
}

// errorMsg is the reply to a request that cannot be served.
type errorMsg struct {
	Type    string `json:"type"` // always "error"
	Message string `json:"message"`
}

func errorJSON(msg string) []byte { return mustJSON(errorMsg{Type: "error", Message: msg}) }

// serve runs one client: a writer goroutine drains its queue and pings,
// this goroutine reads requests until the connection fails or goes quiet
// for ReadTimeout.
func serve(d Deps, conn *websocket.Conn) {
	var once sync.Once
	cl := &client{id: nextID.Add(1), send: make(chan [][]byte, QueueSize)}
	done := make(chan struct{})
	cl.drop = func() { once.Do(func() { close(done); _ = conn.Close() }) }
	d.Root.Send(d.Hub, &register{c: cl})
	defer func() {
		d.Root.Send(d.Hub, &unregister{id: cl.id})
		cl.drop()
	}()
	go writer(conn, cl, done, d.PingInterval)

	conn.SetReadLimit(maxMessage)
	alive := func() error { return conn.SetReadDeadline(time.Now().Add(d.ReadTimeout)) }
	_ = alive()
	conn.SetPongHandler(func(string) error { return alive() })
	for {
		mt, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		_ = alive()
		if mt == websocket.TextMessage && !utf8.Valid(data) {
			// RFC 6455 §8.1: text that is not UTF-8 fails the connection.
			msg := websocket.FormatCloseMessage(websocket.CloseInvalidFramePayloadData, "text message is not UTF-8")
			_ = conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(writeWait))
			return
		}
		var req request
		if err := json.Unmarshal(data, &req); err != nil {
			enqueue(cl, errorJSON("invalid JSON: "+messages.JSONError(err, "the message")))
			continue
		}
		switch req.Type {
		case "request-domains":
			r, err := httpx.Ask[*messages.GetDomainsReply](d.Root, d.Ledger, &messages.GetDomains{}, httpx.AskTimeout)
			if err != nil {
				enqueue(cl, errorJSON("domains: "+err.Error()))
				continue
			}
			enqueue(cl, mustJSON(map[string]any{"type": "domains-list", "domains": r.Domains}))
		case "subscribe-log":
			// The legacy form names no channel: the core channel's lines,
			// as "log" messages.
			legacy := req.Channel == ""
			if legacy {
				req.Channel = "core"
			}
			if _, ok := d.Channels[req.Channel]; !ok || !messages.KnownLogChannel(req.Channel) {
				enqueue(cl, errorJSON("unknown log channel: "+req.Channel))
				continue
			}
			// Live lines are held from here; the snapshot is read after.
			d.Root.Send(d.Hub, &subscribeLog{id: cl.id, channel: req.Channel, legacy: legacy})
			lines, seq, err := tailLog(d, req)
			if err != nil {
				d.Root.Send(d.Hub, &unsubscribeLog{id: cl.id})
				enqueue(cl, errorJSON(err.Error()))
				continue
			}
			snap := mustJSON(map[string]any{"type": "log-snapshot", "channel": req.Channel, "lines": lines})
			d.Root.Send(d.Hub, &logSnapshot{id: cl.id, channel: req.Channel, snapshot: snap, seq: seq})
		case "unsubscribe-log":
			d.Root.Send(d.Hub, &unsubscribeLog{id: cl.id})
		case "subscribe-stats", "request-stats-snapshot":
			if d.Stats == nil {
				enqueue(cl, errorJSON("stats are not available"))
				continue
			}
			snap, err := d.Stats(req.Minutes)
			if err != nil {
				enqueue(cl, errorJSON("stats: "+err.Error()))
				continue
			}
			// Through the hub, so the snapshot comes before the updates.
			d.Root.Send(d.Hub, &subscribeStats{id: cl.id, on: req.Type == "subscribe-stats" || cl.statsOn.Load(), snap: snap})
			if req.Type == "subscribe-stats" {
				cl.statsOn.Store(true)
			}
		case "unsubscribe-stats":
			cl.statsOn.Store(false)
			d.Root.Send(d.Hub, &subscribeStats{id: cl.id, on: false})
		default:
			enqueue(cl, errorJSON("unknown message type: "+req.Type))
		}
	}
}

// tailLog reads the snapshot a subscribe-log starts with: Lines lines
// (default and maximum as for GET /api/logs/{channel}).
func tailLog(d Deps, req request) ([]string, uint64, error) {
	pid, ok := d.Channels[req.Channel]
	if !ok || !messages.KnownLogChannel(req.Channel) {
		return nil, 0, &httpx.Error{Msg: "unknown log channel: " + req.Channel}
	}
	n := req.Lines
	if n <= 0 {
		n = messages.DefaultLogLines
	}
	n = min(n, messages.MaxLogLines)
	r, err := httpx.Ask[*messages.GetLogTailReply](d.Root, pid, &messages.GetLogTail{Lines: n}, httpx.AskTimeout)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return nil, 0, &httpx.Error{Msg: "log tail", Err: err}
	}
	return r.Lines, r.Seq, nil
}

// enqueue adds a reply to the client's own queue; a client that does not
// drain its queue is dropped, as for broadcasts.
func enqueue(cl *client, b []byte) {
	if !cl.offer(b) {
		cl.drop()
	}
}

func writer(conn *websocket.Conn, cl *client, done <-chan struct{}, pingInterval time.Duration) {
	ping := time.NewTicker(pingInterval)
	defer ping.Stop()
	for {
		select {
		case <-done:
			return
		case msgs := <-cl.send:
			cl.taken(msgs)
			for _, b := range msgs {
				_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
				if err := conn.WriteMessage(websocket.TextMessage, b); err != nil {
					cl.drop()
					return
				}
			}
		case <-ping.C:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				cl.drop()
				return
			}
		}
	}
}
