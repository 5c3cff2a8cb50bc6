package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// maxBody bounds what the CLI reads from one answer (a /metrics page of
// a busy node is a few hundred KiB; 32 MiB is far above any answer).
const maxBody = 32 << 20

// client speaks to the admin API at one address.
type client struct {
	addr string // as given, for messages
	base string // scheme://host:port
	hc   *http.Client
	ctx  context.Context // ends the requests in flight (the command was interrupted); nil: never
}

func newClient(addr string, timeout time.Duration) *client {
	base := addr
	if !strings.Contains(addr, "://") {
		base = "http://" + addr
	}
	return &client{addr: addr, base: strings.TrimRight(base, "/"), hc: &http.Client{Timeout: timeout}}
}

// do sends one request and returns the status and body. A failure to
// get an answer, or an answer from something that is not a peerdns node
// (the admin server names itself "peerdns" in every answer), is an
// ExitNoNode error.
func (c *client) do(method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, fail(ExitUsage, "bad --admin-addr %q: %v", c.addr, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil && ctx.Err() != nil {
		return 0, nil, fail(ExitInterrupted, "interrupted before %s answered", c.addr)
	}
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, nil, fail(ExitNoNode, "cannot reach a node at %s: %v (is it running? set --admin-addr or PEERDNS_ADMIN_ADDR)", c.addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil && ctx.Err() != nil {
		return 0, nil, fail(ExitInterrupted, "interrupted before %s answered", c.addr)
	}
	if err != nil {
		return 0, nil, fail(ExitNoNode, "reading the answer of %s: %v", c.addr, err)
	}
	if resp.Header.Get("Server") != "peerdns" {
		return 0, nil, fail(ExitNoNode, "%s is not a peerdns node (its answer to %s was %s from %q)", c.addr, path, resp.Status, resp.Header.Get("Server"))
	}
	return resp.StatusCode, b, nil
}

// refused is the error for a node that answered status with msg.
func refused(status int, msg []byte) error {
	m := strings.TrimSpace(string(msg))
	var j struct {
		Error   string   `json:"error"`
		Message string   `json:"message"`
		Errors  []string `json:"errors"`
	}
	if json.Unmarshal(msg, &j) == nil {
		switch {
		case len(j.Errors) > 0:
			m = strings.Join(j.Errors, "; ")
		case j.Message != "":
			m = j.Message
		case j.Error != "":
			m = j.Error
		}
	}
	return fail(ExitRefused, "the node answered %d %s: %s", status, http.StatusText(status), clip(m))
}

// maxMessage bounds how much of a node's message goes to stderr.
const maxMessage = 300

// clip cuts m to maxMessage bytes, between characters.
func clip(m string) string {
	if len(m) <= maxMessage {
		return m
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut--
	}
	return m[:cut] + "..."
}

// Message is text a node sent (an error body, an answer that is not
// what was asked) made fit for one line of stderr: at most 300 bytes,
// cut between characters, with no control character (oneLine).
func Message(b []byte) string { return oneLine(clip(string(b))) }

// getJSON GETs path and decodes its 200 answer into v.
func (c *client) getJSON(path string, v any) error {
	st, b, err := c.do("GET", path, nil)
	if err != nil {
		return err
	}
	if st != http.StatusOK {
		return refused(st, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fail(ExitNoNode, "%s answered %s with something that is not its JSON: %v", c.addr, path, err)
	}
	return nil
}

// getRaw GETs path and returns its 200 body.
func (c *client) getRaw(path string) ([]byte, error) {
	st, b, err := c.do("GET", path, nil)
	if err != nil {
		return nil, err
	}
	if st != http.StatusOK {
		return nil, refused(st, b)
	}
	return b, nil
}

// post POSTs body as JSON to path; a 200 answer is decoded into v when
// v is not nil (the plain-text `OK` answers are not JSON).
func (c *client) post(path string, body, v any) error {
	st, b, err := c.do("POST", path, body)
	if err != nil {
		return err
	}
	if st != http.StatusOK {
		return refused(st, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			return fail(ExitNoNode, "%s answered %s with something that is not its JSON: %v", c.addr, path, err)
		}
	}
	return nil
}

// printJSON writes v indented, for --json.
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
