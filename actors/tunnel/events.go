package tunnel

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/eventstream"

	"peerdns/messages"
)

// events writes tunnel events to the tunnel log channel and publishes
// them as tunnel-log hints. Safe for concurrent use (the data path logs
// refused streams and failed dials through it).
type events struct {
	log    *slog.Logger
	stream *eventstream.EventStream // nil: no hints (tests of pure parts)

	mu         sync.Mutex // guards the rate limit below
	windowFrom time.Time
	inWindow   int
	dropped    int
}

// maxDataPathLines bounds data-path log lines per second, so a peer
// flooding us with refused streams cannot flood the log.
const maxDataPathLines = 20

func (e *events) emit(level slog.Level, id, msg string, attrs ...any) {
	e.log.Log(context.Background(), level, msg, append([]any{"tunnel", id}, attrs...)...)
	if e.stream == nil {
		return
	}
	text := msg
	for i := 0; i+1 < len(attrs); i += 2 {
		text += fmt.Sprintf(" %v=%v", attrs[i], attrs[i+1])
	}
	e.stream.Publish(&messages.Hint{Type: messages.HintTunnelLog, Data: map[string]any{
		"id": id, "level": strings.ToLower(level.String()), "message": text,
	}})
}

// dataPath emits like emit, at most maxDataPathLines a second; the lines
// dropped are counted in the next line that gets through.
func (e *events) dataPath(level slog.Level, id, msg string, attrs ...any) {
	e.mu.Lock()
	now := time.Now()
	if now.Sub(e.windowFrom) >= time.Second {
		e.windowFrom, e.inWindow = now, 0
	}
	if e.inWindow >= maxDataPathLines {
		e.dropped++
		e.mu.Unlock()
		return
	}
	e.inWindow++
	dropped := e.dropped
	e.dropped = 0
	e.mu.Unlock()
	if dropped > 0 {
		attrs = append(attrs, "suppressed", dropped)
	}
	e.emit(level, id, msg, attrs...)
}

func (e *events) hint(typ string) {
	if e.stream != nil {
		e.stream.Publish(&messages.Hint{Type: typ})
	}
}
