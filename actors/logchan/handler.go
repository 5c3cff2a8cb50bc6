package logchan

import (
	"bytes"
	"context"
	"log/slog"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

// maxKeptBuf is the largest buffer a handler keeps between records.
const maxKeptBuf = 64 << 10

// Handler is a slog.Handler that formats records as text lines and sends
// them to a channel actor. Sending never blocks the logger: the actor's
// mailbox takes it.
type Handler struct {
	channel string
	root    *actor.RootContext
	pid     *actor.PID
	level   slog.Leveler
	text    slog.Handler  // formats into buf; carries the attrs and groups
	mu      *sync.Mutex   // guards buf across derived handlers
	buf     *bytes.Buffer // what text writes, one record at a time
}

// NewHandler makes a handler writing to the actor pid of channel.
func NewHandler(root *actor.RootContext, pid *actor.PID, channel string, level slog.Leveler) *Handler {
	buf := &bytes.Buffer{}
	text := slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	return &Handler{channel: channel, root: root, pid: pid, level: level, text: text, mu: &sync.Mutex{}, buf: buf}
}

// Enabled reports whether level is logged.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

// Handle formats r and sends it to the channel actor.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.buf.Reset()
	_ = h.text.Handle(context.Background(), r)
	line := string(bytes.TrimRight(h.buf.Bytes(), "\n"))
	if h.buf.Cap() > maxKeptBuf {
		// A huge record's buffer is not kept for the small ones after it.
		*h.buf = bytes.Buffer{}
	}
	h.mu.Unlock()
	h.root.Send(h.pid, &messages.LogLine{Channel: h.channel, Level: r.Level.String(), Time: r.Time, Message: line})
	return nil
}

// WithAttrs returns a handler that adds attrs to every record.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.text = h.text.WithAttrs(attrs)
	return &c
}

// WithGroup returns a handler that nests later attrs under name (inside
// the groups h has).
func (h *Handler) WithGroup(name string) slog.Handler {
	c := *h
	c.text = h.text.WithGroup(name)
	return &c
}
