package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"peerdns/http/httpx"
	"peerdns/http/ws"
	"peerdns/internal/testutil"
	"peerdns/messages"
)

func dialWS(t *testing.T, addr string, readBuf int) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	if readBuf > 0 {
		d.NetDialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, a)
			if err == nil {
				_ = c.(*net.TCPConn).SetReadBuffer(readBuf)
			}
			return c, err
		}
	}
	c, _, err := d.Dial("ws://"+addr+"/ws", nil)
	if err != nil {
		t.Fatalf("dial ws: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type wsMsg map[string]any

func readUntil(t *testing.T, c *websocket.Conn, want func(wsMsg) bool) wsMsg {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, b, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("ws read: %v", err)
		}
		var m wsMsg
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("ws message %q: %v", b, err)
		}
		if want(m) {
			return m
		}
	}
}

func ofType(typ string) func(wsMsg) bool { return func(m wsMsg) bool { return m["type"] == typ } }

func TestWebSocketRequestsAndHints(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	base := "http://" + n.AdminAddr()
	c := dialWS(t, n.AdminAddr(), 0)

	addDomain(t, base, "ws.p2p", hashA)
	readUntil(t, c, ofType(messages.HintDatabase))

	if err := c.WriteJSON(map[string]any{"type": "request-domains"}); err != nil {
		t.Fatal(err)
	}
	m := readUntil(t, c, ofType("domains-list"))
	if !strings.Contains(fmt.Sprint(m["domains"]), "ws.p2p") {
		t.Fatalf("domains-list = %v", m)
	}

	if err := c.WriteJSON(map[string]any{"type": "subscribe-log", "channel": "core", "lines": 3}); err != nil {
		t.Fatal(err)
	}
	snap := readUntil(t, c, ofType("log-snapshot"))
	if snap["channel"] != "core" || len(snap["lines"].([]any)) != 3 {
		t.Fatalf("log-snapshot = %v", snap)
	}
	addDomain(t, base, "live.p2p", hashA)
	line := readUntil(t, c, func(m wsMsg) bool {
		return m["type"] == "file-log" && strings.Contains(fmt.Sprint(m["message"]), "live.p2p")
	})
	if line["channel"] != "core" || line["level"] != "INFO" {
		t.Fatalf("file-log = %v", line)
	}
	// The edge's access lines reach the channel's subscribers live
	// (they come in batches).
	if err := c.WriteJSON(map[string]any{"type": "subscribe-log", "channel": "httpProxy", "lines": 1}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, ofType("log-snapshot"))
	edge, _ := n.EdgeAddrs()
	req, _ := http.NewRequest("GET", "http://"+edge+"/seen-live", nil)
	req.Host = "nobody.p2p"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	access := readUntil(t, c, func(m wsMsg) bool {
		return m["type"] == "file-log" && strings.Contains(fmt.Sprint(m["message"]), "path=/seen-live")
	})
	if access["channel"] != "httpProxy" || !strings.Contains(fmt.Sprint(access["message"]), "status=404") {
		t.Fatalf("access line = %v", access)
	}
	if err := c.WriteJSON(map[string]any{"type": "subscribe-log", "channel": "../etc"}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, ofType("error"))
	if err := c.WriteMessage(websocket.TextMessage, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, ofType("error"))

	// remove-domain broadcasts its three hints.
	if code, _ := call(t, "POST", base+"/api/remove-domain", `{"domain":"ws.p2p"}`); code != 200 {
		t.Fatal("remove failed")
	}
	readUntil(t, c, ofType(messages.HintTunnelClients))

	// cleanup-interfaces broadcasts update-interfaces every time: once
	// when it frees ws.p2p's address, and again when nothing is left.
	for i := 0; i < 2; i++ {
		if code, _ := call(t, "POST", base+"/api/cleanup-interfaces", ""); code != 200 {
			t.Fatal("cleanup-interfaces failed")
		}
		readUntil(t, c, ofType(messages.HintInterfaces))
	}
}

// A client that never reads is dropped once its queue is full, while every
// other client keeps receiving everything.
func TestWebSocketSlowClientIsDropped(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	const readers = 8
	var conns []*websocket.Conn
	for i := 0; i < readers; i++ {
		conns = append(conns, dialWS(t, n.AdminAddr(), 0))
	}
	dialWS(t, n.AdminAddr(), 4096) // the slow client: never reads, tiny buffer

	count := func() int {
		r, err := httpx.Ask[*ws.ClientCountReply](n.root.System.Root, n.hub, &ws.ClientCount{}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return r.N
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := count(); got != readers+1 {
			return fmt.Errorf("%d clients registered", got)
		}
		return nil
	})

	// Readers drain in the background and remember the last sequence seen.
	var wg sync.WaitGroup
	var mu sync.Mutex
	last := make([]int, readers)
	for i, c := range conns {
		wg.Add(1)
		go func(i int, c *websocket.Conn) {
			defer wg.Done()
			for {
				// A deadline per message, not over the whole test: how
				// long the test takes depends on the machine's load.
				_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
				_, b, err := c.ReadMessage()
				if err != nil {
					return
				}
				var m struct {
					Type string `json:"type"`
					Seq  int    `json:"seq"`
				}
				if json.Unmarshal(b, &m) == nil && m.Type == "test-hint" {
					mu.Lock()
					last[i] = m.Seq
					mu.Unlock()
					if m.Seq < 0 {
						return
					}
				}
			}
		}(i, c)
	}

	// Publish in batches paced by the readers: each batch is published once
	// every reader has the previous one, so only the client that never
	// reads can fall behind.
	// 16 KiB a hint: a few batches overflow whatever the kernel buffers
	// and the client's queue hold. The slow client must be dropped within
	// twice as many hints as its queue and the node's largest send buffer
	// (tcp_wmem's maximum; the client's receive buffer is 4 KiB) hold: a
	// bound in hints, not in time, which a loaded machine overran (eight
	// readers take in 800 KiB of JSON a batch).
	pad := strings.Repeat("x", 16<<10)
	limit := 2 * (ws.QueueSize + maxSendBuffer()/len(pad))
	seq := 0
	for count() != readers {
		if seq >= limit {
			t.Fatalf("%d clients registered after %d hints, want the slow one dropped", count(), seq)
		}
		testutil.Eventually(t, 30*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			for i, l := range last {
				if l != seq {
					return fmt.Errorf("reader %d at %d of %d", i, l, seq)
				}
			}
			return nil
		})
		for i := 0; i < 50; i++ {
			seq++
			n.root.System.EventStream.Publish(&messages.Hint{Type: "test-hint", Data: map[string]any{"seq": seq, "pad": pad}})
		}
	}
	n.root.System.EventStream.Publish(&messages.Hint{Type: "test-hint", Data: map[string]any{"seq": -1}})
	wg.Wait()
	for i, l := range last {
		if l != -1 {
			t.Fatalf("reader %d stopped at %d: a reader lost messages or was dropped", i, l)
		}
	}
	t.Logf("the slow client was dropped after %d hints (bound %d)", seq, limit)
	if seq < ws.QueueSize {
		t.Fatalf("slow client dropped after only %d hints (queue %d)", seq, ws.QueueSize)
	}
}

// maxSendBuffer is the most a TCP socket's send buffer grows to
// (tcp_wmem's maximum), 4 MiB when it cannot be read.
func maxSendBuffer() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem")
	if f := strings.Fields(string(b)); err == nil && len(f) == 3 {
		if n, err := strconv.Atoi(f[2]); err == nil {
			return n
		}
	}
	return 4 << 20
}
