package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/fasthttp/websocket"
)

func (e *env) logs(ch string, lines int) error {
	var raw json.RawMessage
	q := url.Values{"lines": {fmt.Sprint(max(lines, 1))}}
	if err := e.c.getJSON("/api/logs/"+url.PathEscape(ch)+"?"+q.Encode(), &raw); err != nil {
		return err
	}
	var body struct {
		Lines []string `json:"lines"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return fail(ExitNoNode, "%s answered /api/logs with something unexpected: %v", e.c.addr, err)
	}
	if lines == 0 {
		body.Lines = nil
	}
	if e.json {
		return e.printJSON(map[string]any{"channel": ch, "lines": nonNil(body.Lines)})
	}
	for _, l := range body.Lines {
		if _, err := fmt.Fprintln(e.stdout, l); err != nil {
			return err
		}
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// wsURL is the admin WebSocket's address.
func (c *client) wsURL() string {
	u := c.base + "/ws"
	switch {
	case strings.HasPrefix(u, "https://"):
		return "wss://" + u[len("https://"):]
	case strings.HasPrefix(u, "http://"):
		return "ws://" + u[len("http://"):]
	}
	return u
}

// follow prints the last lines of a channel and then each new line as
// it is written, over the admin WebSocket (subscribe-log), until the
// command is interrupted (exit 0) or the node goes away (exit 1). With
// --json each line is one JSON object: {"channel", "line"} for the
// history, the node's file-log message for live lines.
func (e *env) follow(ch string, lines int) error {
	// One plain request first: it tells a node that is down or not a node
	// (exit 1) and an unknown channel (exit 3) apart, as `logs` does.
	var list json.RawMessage
	if err := e.c.getJSON("/api/logs/"+url.PathEscape(ch)+"?lines=1", &list); err != nil {
		return err
	}
	d := websocket.Dialer{HandshakeTimeout: e.c.hc.Timeout}
	conn, resp, err := d.DialContext(e.ctx, e.c.wsURL(), nil)
	if err != nil {
		if resp != nil {
			return fail(ExitRefused, "the node refused the WebSocket: %s", resp.Status)
		}
		return fail(ExitNoNode, "cannot open the WebSocket of %s: %v", e.c.addr, err)
	}
	defer conn.Close()
	sub, _ := json.Marshal(map[string]any{"type": "subscribe-log", "channel": ch, "lines": max(lines, 1)})
	if err := conn.WriteMessage(websocket.TextMessage, sub); err != nil {
		return fail(ExitNoNode, "subscribing to %s: %v", ch, err)
	}
	done := make(chan error, 1)
	go func() { done <- e.readLog(conn, ch, lines) }()
	select {
	case <-e.ctx.Done():
		_ = conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		conn.Close()
		<-done
		return nil
	case err := <-done:
		if e.ctx.Err() != nil {
			return nil
		}
		return err
	}
}

// readLog prints the channel's messages until the connection ends.
func (e *env) readLog(conn *websocket.Conn, ch string, lines int) error {
	for {
		_, b, err := conn.ReadMessage()
		if err != nil {
			return fail(ExitNoNode, "the connection to %s ended: %v", e.c.addr, err)
		}
		var m struct {
			Type    string   `json:"type"`
			Channel string   `json:"channel"`
			Message string   `json:"message"`
			Lines   []string `json:"lines"`
		}
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		switch m.Type {
		case "error":
			return fail(ExitRefused, "the node refused the subscription: %s", m.Message)
		case "log-snapshot":
			if m.Channel != ch {
				continue
			}
			hist := m.Lines
			if len(hist) > lines {
				hist = hist[len(hist)-lines:]
			}
			for _, l := range hist {
				if err := e.printLine(ch, l, nil); err != nil {
					return err
				}
			}
		case "file-log":
			if m.Channel != ch {
				continue
			}
			if err := e.printLine(ch, m.Message, b); err != nil {
				return err
			}
		}
	}
}

func (e *env) printLine(ch, line string, raw []byte) error {
	if !e.json {
		_, err := fmt.Fprintln(e.stdout, line)
		return err
	}
	if raw == nil {
		raw, _ = json.Marshal(map[string]string{"channel": ch, "line": line})
	}
	_, err := fmt.Fprintf(e.stdout, "%s\n", raw)
	return err
}
