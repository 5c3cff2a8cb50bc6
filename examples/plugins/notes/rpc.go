package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
)

// The plugin side of the JSON-RPC 2.0 session with the node: one JSON
// object per line on stdin (from the node) and stdout (to it). Both sides
// send requests; the reader dispatches the node's requests in goroutines
// (a handle may itself call db.get and wait), matches the answers to our
// own requests by id, and writes are serialised. Copy this file to start
// a Go plugin of your own.

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return e.Message }

// handlerFunc answers one request (or notification) from the node.
type handlerFunc func(ctx context.Context, method string, params json.RawMessage) (any, error)

type conn struct {
	w       io.Writer
	wmu     sync.Mutex
	next    atomic.Int64
	mu      sync.Mutex
	pending map[int64]chan message
	log     io.Writer // stderr: the node logs it on the plugins channel
}

func newConn(w, log io.Writer) *conn {
	return &conn{w: w, pending: map[int64]chan message{}, log: log}
}

func (c *conn) write(m message) error {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.w.Write(append(b, '\n'))
	return err
}

// call sends a request to the node and waits for the answer.
func (c *conn) call(ctx context.Context, method string, params any, out any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	id := c.next.Add(1)
	ch := make(chan message, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := c.write(message{ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: p}); err != nil {
		return err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return m.Error
		}
		if out != nil && len(m.Result) > 0 {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// notify sends a notification (no answer).
func (c *conn) notify(method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return c.write(message{Method: method, Params: p})
}

// serve reads the node's lines until r ends, answering requests with h.
// Lines that are not JSON-RPC are reported on the log and skipped.
func (c *conn) serve(ctx context.Context, r io.Reader, h handlerFunc) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var wg sync.WaitGroup
	defer wg.Wait()
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.JSONRPC != "2.0" {
			fmt.Fprintf(c.log, "notes: ignoring a line that is not JSON-RPC: %.80q\n", sc.Bytes())
			continue
		}
		switch {
		case m.Method != "" && len(m.ID) > 0: // a request: answer it
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := h(ctx, m.Method, m.Params)
				out := message{ID: m.ID}
				if err != nil {
					out.Error = &rpcError{Code: -32000, Message: err.Error()}
				} else if out.Result, err = json.Marshal(res); err != nil {
					out.Error = &rpcError{Code: -32603, Message: err.Error()}
				}
				if err := c.write(out); err != nil {
					fmt.Fprintf(c.log, "notes: write: %v\n", err)
				}
			}()
		case m.Method != "": // a notification
			if _, err := h(ctx, m.Method, m.Params); err != nil {
				fmt.Fprintf(c.log, "notes: %s: %v\n", m.Method, err)
			}
		case len(m.ID) > 0: // the answer to one of our calls
			id, err := strconv.ParseInt(string(m.ID), 10, 64)
			if err != nil {
				continue
			}
			c.mu.Lock()
			ch := c.pending[id]
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}
