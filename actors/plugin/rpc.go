package plugin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
)

// The JSON-RPC 2.0 session with a handler process: one JSON object per
// line on its stdin (ours) and stdout (its). Both sides send requests
// (with an id) and notifications (without); each answers the other's
// requests with a result or an error. Lines longer than maxLine end the
// session (the process is stopped: a handler flooding one line cannot
// grow our memory); the message of an error answer is cut to 200
// bytes (it becomes the text of a 502 or of the admin API's error); a
// line that is not a JSON-RPC object is logged (at
// most a few a second) and skipped, so the request it should have
// answered times out. At most maxInflight of the plugin's own requests
// run at once; more wait, which slows the handler that sends them, not
// the node.
//
// The handler's notifications are served on the read loop, in order
// (its log lines stay in order), but for those that wait on the network
// (peer.call and peer.send, up to the peer timeout: hooks.offLoop): each
// runs on its own goroutine, at most maxNotifyInflight at once per
// session, so the replies to the node's calls are read meanwhile. One
// that arrives while maxNotifyInflight wait is dropped (a notification
// has no answer to carry an error) and the drop is logged with a count
// (hooks.dropped); a handler that needs to know uses a request.
//
// Lines are encoded without HTML escaping (marshal), so what the node
// sends is about the size of the data it carries.
//
// Lines to the handler go through a queue of maxQueued lines that one
// writer goroutine empties into its stdin, so a handler that stops
// reading its input costs nobody more than their own deadline: a call
// waits for a place in the queue until its context ends (the HTTP
// request's 504), a notification until its context ends, and a reply
// to the handler's own request until the session ends. The supervisor
// never waits on it: settings.changed goes from a goroutine of the
// session (runner.settingsSender). The writer goroutine ends with the
// session, or when the handler's stdin is closed after it exited.

const (
	maxLine           = 8 << 20
	maxInflight       = 64
	maxQueued         = 16
	maxNotifyInflight = 16
)

// ErrSessionClosed: the handler's session ended (it exited or was
// stopped) before an answer came.
var ErrSessionClosed = errors.New("plugin handler session closed")

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("plugin error %d: %s", e.Code, e.Message) }

type rpcMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type response struct {
	result json.RawMessage
	err    error
}

// serveFunc answers one call from the plugin.
type serveFunc func(ctx context.Context, method string, params json.RawMessage) (any, error)

// sessionHooks are what a session tells its owner and asks it.
type sessionHooks struct {
	// garbage gets a line that is not JSON-RPC.
	garbage func(line []byte)
	// offLoop says a notification of method may wait long (on the
	// network) and is served off the read loop; nil: none.
	offLoop func(method string) bool
	// dropped is told of a notification dropped because
	// maxNotifyInflight were waiting; it runs on the read loop.
	dropped func(method string)
}

type session struct {
	w   io.Writer
	out chan []byte // lines for w, written by one goroutine

	next    atomic.Int64
	mu      sync.Mutex // guards pending and err
	pending map[int64]chan response
	err     error // set once the session ended

	serve  serveFunc
	hooks  sessionHooks
	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{}
	notes  chan struct{} // notifications served off the read loop
	done   chan struct{} // closed when the read loop ended
	wg     sync.WaitGroup
}

// newSession starts reading r; calls from the plugin go to serve.
func newSession(r io.Reader, w io.Writer, serve serveFunc, hooks sessionHooks) *session {
	s := &session{w: w, pending: map[int64]chan response{}, serve: serve, hooks: hooks,
		sem: make(chan struct{}, maxInflight), notes: make(chan struct{}, maxNotifyInflight),
		done: make(chan struct{}), out: make(chan []byte, maxQueued)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.read(r)
	go s.write()
	return s
}

// write empties the queue into w until the session ends.
func (s *session) write() {
	for {
		select {
		case b := <-s.out:
			if _, err := s.w.Write(b); err != nil {
				s.fail(fmt.Errorf("%w: write: %v", ErrSessionClosed, err))
				return
			}
		case <-s.ctx.Done():
			return
		}
	}
}

// Call sends a request and waits for its answer, ctx's end or the end of
// the session.
func (s *session) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := s.next.Add(1)
	ch := make(chan response, 1)
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	s.pending[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
	}()
	if err := s.send(ctx, rpcMsg{ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method}, params); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r.result, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Notify sends a notification; it waits for a place in the queue until
// ctx ends.
func (s *session) Notify(ctx context.Context, method string, params any) error {
	return s.send(ctx, rpcMsg{Method: method}, params)
}

func (s *session) send(ctx context.Context, m rpcMsg, params any) error {
	m.JSONRPC = "2.0"
	if params != nil {
		b, err := marshal(params)
		if err != nil {
			return err
		}
		m.Params = b
	}
	b, err := marshal(m)
	if err != nil {
		return err
	}
	return s.writeLine(ctx, b)
}

// marshal is json.Marshal without HTML escaping: a '<', '>' or '&' is
// sent as itself, not as six bytes (escaping would send a 1 MiB value
// of them as 6 MiB, and a db.list answer as six times MaxListBytes).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeLine queues b: a queue already full (the handler not reading)
// waits until ctx or the session ends. A session that ended queues
// nothing.
func (s *session) writeLine(ctx context.Context, b []byte) error {
	if s.ctx.Err() != nil {
		return s.closed()
	}
	b = append(b, '\n')
	select {
	case s.out <- b:
		return nil
	default:
	}
	select {
	case s.out <- b:
		return nil
	case <-s.ctx.Done():
		return s.closed()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closed is the error of a session that ended.
func (s *session) closed() error {
	if err := s.Err(); err != nil {
		return err
	}
	return ErrSessionClosed
}

// fail ends the session: every waiting call gets err.
func (s *session) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.err = err
	for id, ch := range s.pending {
		ch <- response{err: err}
		delete(s.pending, id)
	}
	s.cancel()
}

// Err is why the session ended (nil while it runs).
func (s *session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Done is closed when the read loop ended and every call the plugin made
// was answered or abandoned.
func (s *session) Done() <-chan struct{} { return s.done }

func (s *session) read(r io.Reader) {
	defer close(s.done)
	defer s.wg.Wait()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if err != nil {
			s.fail(fmt.Errorf("%w: %v", ErrSessionClosed, err))
			return
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var m rpcMsg
		if json.Unmarshal(line, &m) != nil || m.JSONRPC != "2.0" {
			s.hooks.garbage(line)
			continue
		}
		switch {
		case m.Method != "" && len(m.ID) > 0:
			select {
			case s.sem <- struct{}{}:
			case <-s.ctx.Done():
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() { <-s.sem }()
				res, err := s.serve(s.ctx, m.Method, m.Params)
				out := rpcMsg{JSONRPC: "2.0", ID: m.ID}
				if err != nil {
					out.Error = &rpcError{Code: -32000, Message: err.Error()}
				} else if out.Result, err = marshal(res); err != nil {
					out.Error = &rpcError{Code: -32603, Message: err.Error()}
				}
				b, _ := marshal(out)
				_ = s.writeLine(s.ctx, b)
			}()
		case m.Method != "" && s.hooks.offLoop != nil && s.hooks.offLoop(m.Method):
			// A notification that may wait on the network: see the
			// comment at the top.
			select {
			case s.notes <- struct{}{}:
			default:
				if s.hooks.dropped != nil {
					s.hooks.dropped(m.Method)
				}
				continue
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() { <-s.notes }()
				_, _ = s.serve(s.ctx, m.Method, m.Params)
			}()
		case m.Method != "":
			_, _ = s.serve(s.ctx, m.Method, m.Params) // a notification: no answer
		case len(m.ID) > 0:
			id, err := strconv.ParseInt(string(m.ID), 10, 64)
			if err != nil {
				s.hooks.garbage(line)
				continue
			}
			s.mu.Lock()
			ch := s.pending[id]
			delete(s.pending, id)
			s.mu.Unlock()
			if ch == nil {
				continue // answered after its caller gave up
			}
			if m.Error != nil {
				// Its message reaches HTTP answers and logs: cut as a
				// log line is.
				m.Error.Message = clip([]byte(m.Error.Message))
				ch <- response{err: m.Error}
			} else {
				ch <- response{result: m.Result}
			}
		default:
			s.hooks.garbage(line)
		}
	}
}

// readLine reads one line of at most maxLine bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) > maxLine {
			return nil, fmt.Errorf("a line longer than %d bytes", maxLine)
		}
		if err == nil {
			if buf == nil {
				return chunk, nil
			}
			return append(buf, chunk...), nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			buf = append(buf, chunk...)
			continue
		}
		return nil, err
	}
}
