package messages

import "time"

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

// LogBatch is many lines for one channel actor, written in one go (a
// busy writer such as the edge proxy's access log). The lines are handed
// over: the channel actor numbers them in place and publishes the batch
// itself on the event stream, so the sender must not keep or reuse them.
type LogBatch struct{ Lines []*LogLine }

// GetLogTail asks a channel actor for the last Lines lines of its file.
type GetLogTail struct{ Lines int }

// GetLogTailReply answers GetLogTail: oldest line first, an empty list
// when nothing was logged yet.
type GetLogTailReply struct {
	Lines []string
	Seq   uint64 // the Seq of the last line written before the tail was read
	Err   error
}
