package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

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
		if _, err := fmt.Fprintln(e.stdout, printable(l, false)); err != nil {
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
// command is interrupted (exit 0) or the node goes away (exit 1). A
// quiet channel sends nothing for as long as it likes, so the CLI pings
// the node every half --timeout: a node that answers neither a ping nor
// with a line for --timeout has stopped (its host is suspended, its
// network gone) and is an exit 1, as for the other commands. With
// --json each line is one JSON object: {"channel", "line"} for the
// history, the node's file-log message for live lines.
func (e *env) follow(ch string, lines int) error {
	// One plain request first: it tells a node that is down or not a node
	// (exit 1) and an unknown channel (exit 3) apart, as `logs` does.
	var list json.RawMessage
	if err := e.c.getJSON("/api/logs/"+url.PathEscape(ch)+"?lines=1", &list); err != nil {
		if e.ctx.Err() != nil {
			return nil // interrupted: how -f always ends
		}
		return err
	}
	d := websocket.Dialer{HandshakeTimeout: e.c.hc.Timeout}
	conn, resp, err := d.DialContext(e.ctx, e.c.wsURL(), nil)
	if err != nil {
		if e.ctx.Err() != nil {
			return nil
		}
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
	timeout := e.c.hc.Timeout
	heard := func() error { return conn.SetReadDeadline(time.Now().Add(timeout)) }
	_ = heard()
	conn.SetPongHandler(func(string) error { return heard() })
	done := make(chan error, 1)
	go func() { done <- e.readLog(conn, ch, lines, heard) }()
	ping := time.NewTicker(max(timeout/2, time.Millisecond)) // --timeout 1ns: NewTicker panics at 0
	defer ping.Stop()
	for {
		select {
		case <-e.ctx.Done():
			_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(timeout))
			conn.Close()
			<-done
			return nil
		case <-ping.C:
			// WriteControl may run beside the reader; a failed ping
			// shows as the reader's error.
			_ = conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(timeout))
			continue
		case err := <-done:
			if e.ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// readLog prints the channel's messages until the connection ends;
// heard moves the read deadline on after each message.
func (e *env) readLog(conn *websocket.Conn, ch string, lines int, heard func() error) error {
	for {
		_, b, err := conn.ReadMessage()
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			return fail(ExitNoNode, "%s stopped answering: no line and no answer to a ping for %v", e.c.addr, e.c.hc.Timeout)
		}
		if err != nil {
			return fail(ExitNoNode, "the connection to %s ended: %v", e.c.addr, err)
		}
		_ = heard()
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
		_, err := fmt.Fprintln(e.stdout, printable(line, false))
		return err
	}
	if raw == nil {
		raw, _ = json.Marshal(map[string]string{"channel": ch, "line": line})
	}
	_, err := fmt.Fprintf(e.stdout, "%s\n", raw)
	return err
}
