package messages

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The log channel family: the channels of the admin spec, the lines the
// channel actors (actors/logchan) write and publish, and the tail request
// the admin API and the WebSocket send them.

// LogChannel is the spec's log channel object (GET /api/logs).
type LogChannel struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	File  string `json:"file"` // the file name under DATA/logs
}

// LogChannels are the log channels, in display order. Read-only: the node
// runs one channel actor per entry and the API lists them as they are.
var LogChannels = []LogChannel{
	{ID: "core", Label: "Core", File: "core.log"},
	{ID: "proxy", Label: "Proxy", File: "proxy.log"},
	{ID: "httpProxy", Label: "HTTP Proxy", File: "httpProxy.log"},
	{ID: "dns", Label: "DNS", File: "dns.log"},
	{ID: "plugins", Label: "Plugins", File: "plugins.log"},
	{ID: "tunnel", Label: "Tunnel", File: "tunnel.log"},
}

// KnownLogChannel reports whether id is one of LogChannels.
func KnownLogChannel(id string) bool {
	for _, c := range LogChannels {
		if c.ID == id {
			return true
		}
	}
	return false
}

// Limits of a log tail (GET /api/logs/{channel}, WebSocket subscribe-log).
const (
	DefaultLogLines = 500
	MaxLogLines     = 5000
)

// LogLine is one log line. A log handler sends it to its channel actor,
// which writes it to the channel file and then publishes the same value on
// the actor system's event stream (the WebSocket hub sends it to the
// clients that subscribed to the channel as a file-log message).
type LogLine struct {
	Channel string
	Level   string
	Time    time.Time
	Message string // the formatted line without newline
	Seq     uint64 // set by the channel actor: 1, 2, ... per channel and run
}

// LogBatch is many lines of one channel, written in one go (a busy
// writer such as the edge proxy's access log): their text, each line
// followed by a newline and holding none of its own, and each line's
// time. Their level is the batch's.
//
// A batch is used again once everyone is done with it, so a busy writer
// allocates nothing per line. NewLogBatch gives one holding one
// reference, the writer's, which goes with it to the channel actor; the
// actor writes the text, numbers the batch, publishes it on the event
// stream and releases its reference. A subscriber that keeps the batch
// past its event stream callback takes a reference there (Retain) and
// releases it when done; one that does not must not touch the batch
// after its callback returns.
type LogBatch struct {
	Channel string
	Level   string
	Text    []byte
	Times   []time.Time
	Seq     uint64 // set by the channel actor: the first line's; the others follow
	refs    atomic.Int32
}

var logBatches = sync.Pool{New: func() any { return new(LogBatch) }}

// maxPooledBatch is the largest text a batch keeps when it goes back to
// be used again (a burst's bigger one is let go).
const maxPooledBatch = 1 << 20

// NewLogBatch returns an empty batch of channel's lines at level, with
// one reference.
func NewLogBatch(channel, level string) *LogBatch {
	b := logBatches.Get().(*LogBatch)
	b.Channel, b.Level = channel, level
	b.refs.Store(1)
	return b
}

// EndLine ends the line appended to Text since the previous one (or the
// start), made at at.
func (b *LogBatch) EndLine(at time.Time) {
	b.Text = append(b.Text, '\n')
	b.Times = append(b.Times, at)
}

// Len is the number of lines.
func (b *LogBatch) Len() int { return len(b.Times) }

// Retain takes a reference to b.
func (b *LogBatch) Retain() { b.refs.Add(1) }

// Release gives a reference back; the last one returns b to be used
// again.
func (b *LogBatch) Release() {
	switch n := b.refs.Add(-1); {
	case n > 0:
		return
	case n < 0:
		panic("messages: LogBatch released more often than retained")
	}
	if cap(b.Text) > maxPooledBatch {
		return
	}
	b.Text, b.Times = b.Text[:0], b.Times[:0]
	b.Channel, b.Level, b.Seq = "", "", 0
	logBatches.Put(b)
}

// Lines returns the batch's lines as LogLines of their own (copies: they
// outlive the batch).
func (b *LogBatch) Lines() []*LogLine {
	text := string(b.Text) // one copy for all of them
	lines := make([]LogLine, len(b.Times))
	out := make([]*LogLine, len(b.Times))
	for i, at := range b.Times {
		end := strings.IndexByte(text, '\n')
		if end < 0 {
			end = len(text)
		}
		lines[i] = LogLine{Channel: b.Channel, Level: b.Level, Time: at, Message: text[:end], Seq: b.Seq + uint64(i)}
		out[i] = &lines[i]
		text = text[min(end+1, len(text)):]
	}
	return out
}

// GetLogTail asks a channel actor for the last Lines lines of its file.
type GetLogTail struct{ Lines int }

// GetLogTailReply answers GetLogTail: oldest line first, an empty list
// when nothing was logged yet.
type GetLogTailReply struct {
	Lines []string
	Seq   uint64 // the Seq of the last line written before the tail was read
	Err   error
}
