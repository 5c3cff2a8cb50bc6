package ws

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"
	"go.uber.org/goleak"

	"peerdns/http/httpx"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

// testWS is a /ws endpoint on loopback with a real hub, a ledger that
// lists one domain and a "core" log channel that answers tails with the
// number of lines it was asked for.
type testWS struct {
	addr string
	sys  *actor.ActorSystem
	hub  *actor.PID
}

func quietSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	return sys
}

// newTestWS starts the endpoint; tune adjusts Deps (limits); guarded
// serves it behind an httpx.Guard for its own address, as the admin API
// does.
func newTestWS(t *testing.T, guarded bool, tune func(*Deps)) *testWS {
	t.Helper()
	sys := quietSystem(t)
	hub := sys.Root.Spawn(Props(slog.New(slog.DiscardHandler), nil))
	ledger := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*messages.GetDomains); ok {
			c.Respond(&messages.GetDomainsReply{Domains: []messages.DomainEntry{{Domain: "a.p2p", Hash: "internal"}}})
		}
	}))
	core := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.GetLogTail); ok {
			c.Respond(&messages.GetLogTailReply{Lines: []string{fmt.Sprint(m.Lines)}})
		}
	}))
	d := Deps{Root: sys.Root, Hub: hub, Ledger: ledger, Channels: map[string]*actor.PID{"core": core}}
	if tune != nil {
		tune(&d)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(d)
	if guarded {
		g, err := httpx.NewGuard(ln.Addr().String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		h = g.Wrap(nil, h)
	}
	srv := &fasthttp.Server{Handler: h, KeepHijackedConns: true}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		// The hub closes every client as it stops; then nothing is left
		// for the server to wait for.
		_ = sys.Root.StopFuture(hub).Wait()
		_ = srv.Shutdown()
		<-done
	})
	return &testWS{addr: ln.Addr().String(), sys: sys, hub: hub}
}

// dial opens a client; origin "" sends none.
func (w *testWS) dial(t *testing.T, origin string) (*websocket.Conn, error) {
	t.Helper()
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	c, resp, err := (&websocket.Dialer{HandshakeTimeout: 5 * time.Second}).Dial("ws://"+w.addr+"/ws", h)
	if err != nil {
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			return nil, fmt.Errorf("%w: %d %s", err, resp.StatusCode, b)
		}
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

func (w *testWS) mustDial(t *testing.T, origin string) *websocket.Conn {
	t.Helper()
	c, err := w.dial(t, origin)
	if err != nil {
		t.Fatalf("dial with Origin %q: %v", origin, err)
	}
	return c
}

func (w *testWS) clients(t *testing.T) int {
	t.Helper()
	r, err := httpx.Ask[*ClientCountReply](w.sys.Root, w.hub, &ClientCount{}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return r.N
}

func (w *testWS) waitClients(t *testing.T, n int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := w.clients(t); got != n {
			return fmt.Errorf("%d clients registered, want %d", got, n)
		}
		return nil
	})
}

// noLeaks is testutil.NoLeaks minus fasthttp's process-wide date ticker,
// which the first server of the process starts and never stops.
func noLeaks(t *testing.T) {
	t.Helper()
	testutil.NoLeaks(t, goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"))
}

type msg map[string]any

// next reads the next message.
func next(t *testing.T, c *websocket.Conn) msg {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("ws read: %v", err)
	}
	var m msg
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("ws message %q: %v", b, err)
	}
	return m
}

func send(t *testing.T, c *websocket.Conn, v any) {
	t.Helper()
	if err := c.WriteJSON(v); err != nil {
		t.Fatal(err)
	}
}

func TestFanOutAndLogSubscription(t *testing.T) {
	noLeaks(t)
	w := newTestWS(t, true, nil)
	sub, other := w.mustDial(t, ""), w.mustDial(t, "")
	w.waitClients(t, 2)

	send(t, sub, msg{"type": "subscribe-log", "channel": "core", "lines": 3})
	if m := next(t, sub); m["type"] != "log-snapshot" || m["channel"] != "core" || fmt.Sprint(m["lines"]) != "[3]" {
		t.Fatalf("after subscribe-log: %v", m)
	}
	// The hub queued the snapshot and subscribed the client in one step.
	w.sys.EventStream.Publish(&messages.Hint{Type: messages.HintDatabase, Data: map[string]any{"domain": "a.p2p"}})
	for _, c := range []*websocket.Conn{sub, other} {
		if m := next(t, c); m["type"] != messages.HintDatabase || m["domain"] != "a.p2p" || m["timestamp"] == nil {
			t.Fatalf("hint = %v", m)
		}
	}

	w.sys.EventStream.Publish(&messages.LogLine{Channel: "core", Level: "INFO", Time: time.UnixMilli(1700000000000), Message: "hello"})
	w.sys.EventStream.Publish(&messages.LogLine{Channel: "dns", Level: "INFO", Time: time.Now(), Message: "not subscribed"})
	w.sys.EventStream.Publish(&messages.Hint{Type: messages.HintPeers})
	m := next(t, sub)
	if m["type"] != "file-log" || m["channel"] != "core" || m["level"] != "INFO" || m["message"] != "hello" || m["timestamp"] != float64(1700000000000) {
		t.Fatalf("file-log = %v", m)
	}
	if m := next(t, sub); m["type"] != messages.HintPeers {
		t.Fatalf("subscriber got %v, want only its channel's lines then the hint", m)
	}
	if m := next(t, other); m["type"] != messages.HintPeers {
		t.Fatalf("non-subscriber got %v before the hint", m)
	}

	// Once domains-list arrives, the unsubscribe is in the hub's mailbox,
	// ahead of anything published after it.
	send(t, sub, msg{"type": "unsubscribe-log"})
	send(t, sub, msg{"type": "request-domains"})
	if m := next(t, sub); m["type"] != "domains-list" {
		t.Fatalf("request-domains = %v", m)
	}
	w.sys.EventStream.Publish(&messages.LogLine{Channel: "core", Message: "after"})
	w.sys.EventStream.Publish(&messages.Hint{Type: "probe"})
	if m := next(t, sub); m["type"] != "probe" {
		t.Fatalf("after unsubscribe-log got %v, want the probe hint", m)
	}
}

func TestRequests(t *testing.T) {
	noLeaks(t)
	w := newTestWS(t, true, nil)
	c := w.mustDial(t, "")
	tests := []struct {
		name string
		send string
		want func(msg) bool
	}{
		{"request-domains", `{"type":"request-domains"}`, func(m msg) bool {
			return m["type"] == "domains-list" && strings.Contains(fmt.Sprint(m["domains"]), "a.p2p")
		}},
		{"unknown type", `{"type":"dance"}`, func(m msg) bool {
			return m["type"] == "error" && m["message"] == "unknown message type: dance"
		}},
		{"invalid JSON", `{not json`, func(m msg) bool {
			return m["type"] == "error" && strings.HasPrefix(fmt.Sprint(m["message"]), "invalid JSON")
		}},
		{"unknown log channel", `{"type":"subscribe-log","channel":"../etc"}`, func(m msg) bool {
			return m["type"] == "error" && strings.Contains(fmt.Sprint(m["message"]), "unknown log channel")
		}},
		{"known channel the node does not run", `{"type":"subscribe-log","channel":"dns"}`, func(m msg) bool {
			return m["type"] == "error"
		}},
		{"default lines", `{"type":"subscribe-log","channel":"core"}`, func(m msg) bool {
			return m["type"] == "log-snapshot" && fmt.Sprint(m["lines"]) == fmt.Sprintf("[%d]", messages.DefaultLogLines)
		}},
		{"lines capped", `{"type":"subscribe-log","channel":"core","lines":999999}`, func(m msg) bool {
			return m["type"] == "log-snapshot" && fmt.Sprint(m["lines"]) == fmt.Sprintf("[%d]", messages.MaxLogLines)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := c.WriteMessage(websocket.TextMessage, []byte(tt.send)); err != nil {
				t.Fatal(err)
			}
			if m := next(t, c); !tt.want(m) {
				t.Fatalf("reply to %s = %v", tt.send, m)
			}
		})
	}
}

func TestOriginCheck(t *testing.T) {
	noLeaks(t)
	w := newTestWS(t, true, nil)
	if _, err := w.dial(t, "https://evil.example"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("foreign Origin: %v, want 403", err)
	}
	if _, err := w.dial(t, "null"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("Origin null: %v, want 403", err)
	}
	w.mustDial(t, "")               // the CLI, scripts
	w.mustDial(t, "http://"+w.addr) // the panel itself
	// Another site on the list (another loopback IP, localhost against
	// 127.0.0.1, another port: another program's pages): a WebSocket
	// handshake has no Sec-Fetch-Site to refuse it by.
	for _, o := range []string{"http://127.77.0.5:8080", "http://localhost:1", "http://127.0.0.1:1"} {
		if _, err := w.dial(t, o); err == nil || !strings.Contains(err.Error(), "403") {
			t.Fatalf("Origin %s: %v, want 403", o, err)
		}
	}
	w.waitClients(t, 2)

	// Served without a guard there is no list: only clients without an
	// Origin get in.
	bare := newTestWS(t, false, nil)
	if _, err := bare.dial(t, "http://"+bare.addr); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("unguarded endpoint with an Origin: %v, want 403", err)
	}
	bare.mustDial(t, "")
}

func TestClientCap(t *testing.T) {
	noLeaks(t)
	w := newTestWS(t, true, func(d *Deps) { d.MaxClients = 2 })
	first := w.mustDial(t, "")
	w.mustDial(t, "")
	w.waitClients(t, 2)
	_, err := w.dial(t, "")
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "too many WebSocket clients") {
		t.Fatalf("third client: %v, want 503 naming the cap", err)
	}
	first.Close()
	testutil.Eventually(t, 10*time.Second, func() error {
		_, err := w.dial(t, "")
		return err
	})
}

// A client that answers no ping is dropped after ReadTimeout; one that answers stays
// through many such periods. ReadTimeout is 25 ping intervals: a live
// client is dropped only if no pong of its gets through for a second,
// which a loaded machine's scheduling does not reach, where 400 ms did.
func TestReadDeadline(t *testing.T) {
	noLeaks(t)
	const readTimeout, pingInterval = time.Second, 40 * time.Millisecond
	w := newTestWS(t, true, func(d *Deps) { d.ReadTimeout, d.PingInterval = readTimeout, pingInterval })

	live := w.mustDial(t, "")
	var pings atomic.Int32
	live.SetPingHandler(func(data string) error {
		pings.Add(1)
		return live.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if _, _, err := live.ReadMessage(); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { live.Close(); wg.Wait() })
	w.waitClients(t, 1)

	// The silent client's connection is closed by the server (a read
	// error that is not our own deadline): it was dropped. Not a wait
	// for two clients registered: that lasts only ReadTimeout, which a
	// starved poll can miss.
	start := time.Now()
	dead := w.mustDial(t, "")
	dead.SetPingHandler(func(string) error { return nil }) // reads, never answers
	_ = dead.SetReadDeadline(time.Now().Add(readTimeout + 10*time.Second))
	for {
		if _, _, err := dead.ReadMessage(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("silent client not dropped after %v", time.Since(start))
			}
			break
		}
	}
	if d := time.Since(start); d < readTimeout {
		t.Fatalf("silent client dropped after %v, before ReadTimeout (%v)", d, readTimeout)
	}
	w.waitClients(t, 1)

	// 75 pings = 3 s = three read deadlines, all answered.
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := pings.Load(); n < 3*int32(readTimeout/pingInterval) {
			return fmt.Errorf("%d pings answered", n)
		}
		return nil
	})
	if n := w.clients(t); n != 1 {
		t.Fatalf("%d clients after the live one answered %d pings, want 1", n, pings.Load())
	}
}

func TestDepsDefaults(t *testing.T) {
	d := Deps{}.withDefaults()
	if d.MaxClients != DefaultMaxClients || d.ReadTimeout != DefaultReadTimeout || d.PingInterval != DefaultPingInterval {
		t.Fatalf("defaults = %d %v %v", d.MaxClients, d.ReadTimeout, d.PingInterval)
	}
	if d := (Deps{ReadTimeout: time.Second, PingInterval: 2 * time.Second}).withDefaults(); d.PingInterval != time.Second/2 {
		t.Fatalf("ping interval %v not shorter than the read timeout", d.PingInterval)
	}
}
