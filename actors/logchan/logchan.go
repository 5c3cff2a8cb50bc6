// Package logchan is the node's log channels: one actor per channel
// (core, proxy, httpProxy, dns, plugins, tunnel) owning
// DATA/logs/<channel>.log, with size rotation, tail reads for the admin API
// and live lines on the event stream for WebSocket subscribers.
//
// Rotation uses gopkg.in/natefinch/lumberjack.v2 (size-based, keeps a few
// old files); the tail is read from the current file only, so after a
// rotation a tail can be shorter than asked for until new lines arrive.
package logchan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"gopkg.in/natefinch/lumberjack.v2"
)

// Channels are the log channel ids, in display order.
var Channels = []Channel{
	{ID: "core", Label: "Core"},
	{ID: "proxy", Label: "Proxy"},
	{ID: "httpProxy", Label: "HTTP Proxy"},
	{ID: "dns", Label: "DNS"},
	{ID: "plugins", Label: "Plugins"},
	{ID: "tunnel", Label: "Tunnel"},
}

// Channel is the spec's log channel object.
type Channel struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	File  string `json:"file"`
}

// Known reports whether id is a channel id.
func Known(id string) bool {
	for _, c := range Channels {
		if c.ID == id {
			return true
		}
	}
	return false
}

// Limits of GET /api/logs/{channel}.
const (
	DefaultLines = 500
	MaxLines     = 5000
)

// Rotation: a channel file rotates at MaxSizeMB and keeps MaxBackups.
const (
	MaxSizeMB  = 10
	MaxBackups = 3
)

// Line is one log line, sent to the channel actor and published on the
// event stream after it was written.
type Line struct {
	Channel string
	Level   string
	Time    time.Time
	Message string // the formatted line without newline
}

// Tail asks a channel actor for its last Lines lines.
type Tail struct{ Lines int }

// TailReply answers Tail.
type TailReply struct {
	Lines []string
	Err   error
}

// Actor owns one channel file.
type Actor struct {
	id  string
	dir string
	w   *lumberjack.Logger
}

// Props builds the actor for channel id writing under dir.
func Props(id, dir string) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &Actor{id: id, dir: dir} })
}

// Path is the file of channel id under dir.
func Path(dir, id string) string { return filepath.Join(dir, id+".log") }

// Receive handles one message.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		_ = os.MkdirAll(a.dir, 0o700)
		a.w = &lumberjack.Logger{Filename: Path(a.dir, a.id), MaxSize: MaxSizeMB, MaxBackups: MaxBackups}
	case *actor.Stopping, *actor.Restarting:
		if a.w != nil {
			_ = a.w.Close()
		}
	case *Line:
		if _, err := a.w.Write([]byte(m.Message + "\n")); err != nil {
			fmt.Fprintf(os.Stderr, "log channel %s: %v\n", a.id, err)
			return
		}
		c.ActorSystem().EventStream.Publish(m)
	case *Tail:
		lines, err := tailFile(Path(a.dir, a.id), m.Lines)
		c.Respond(&TailReply{Lines: lines, Err: err})
	}
}

// tailFile returns the last n lines of path (an empty list when the file
// does not exist yet). It reads backwards in blocks, so a tail of a big
// file costs only what it returns.
func tailFile(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat log: %w", err)
	}
	const block = 64 << 10
	var buf []byte
	pos := st.Size()
	for pos > 0 && bytes.Count(buf, []byte{'\n'}) <= n {
		step := int64(block)
		if pos < step {
			step = pos
		}
		pos -= step
		chunk := make([]byte, step)
		if _, err := f.ReadAt(chunk, pos); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read log: %w", err)
		}
		buf = append(chunk, buf...)
	}
	lines := bytes.Split(bytes.TrimRight(buf, "\n"), []byte{'\n'})
	if len(lines) == 1 && len(lines[0]) == 0 {
		return []string{}, nil
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l)
	}
	return out, nil
}
