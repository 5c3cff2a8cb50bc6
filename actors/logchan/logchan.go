// Package logchan is the node's log channels: one actor per channel
// (core, proxy, httpProxy, dns, plugins, tunnel) owning
// DATA/logs/<channel>.log, with size rotation, tail reads for the admin API
// and live lines on the event stream for WebSocket subscribers (a
// messages.LogLine, or a messages.LogBatch for lines that came in one). The
// messages it takes and publishes (messages.LogLine, messages.GetLogTail)
// and the channel list live in messages/logchan.go, so the admin API and
// the WebSocket never import this package.
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
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"gopkg.in/natefinch/lumberjack.v2"

	"peerdns/messages"
)

// Channels are the channels a node runs, one actor each: the list of the
// admin API (messages.LogChannels).
var Channels = messages.LogChannels

// Rotation: a channel file rotates at MaxSizeMB and keeps MaxBackups.
const (
	MaxSizeMB  = 10
	MaxBackups = 3
)

// Actor owns one channel file.
type Actor struct {
	id   string
	dir  string
	w    *lumberjack.Logger
	seq  uint64 // lines written in this run
	lost int    // lines not written since the file started failing
	torn bool   // a failed write left part of a line at the file's end
}

// Props builds the actor for channel id writing under dir.
func Props(id, dir string) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &Actor{id: id, dir: dir} })
}

// writers holds one lumberjack.Logger per file for the whole process.
// lumberjack v2.2.1 starts a mill goroutine per Logger that Close never
// stops (natefinch/lumberjack#56, #205); reusing the Logger across actor
// restarts and node restarts in one process (tests, benchmarks) bounds
// those goroutines by the number of log files. A closed Logger reopens its
// file on the next Write.
var writers sync.Map // path → *lumberjack.Logger

func writerFor(path string) *lumberjack.Logger {
	w, _ := writers.LoadOrStore(path, &lumberjack.Logger{Filename: path, MaxSize: MaxSizeMB, MaxBackups: MaxBackups})
	return w.(*lumberjack.Logger)
}

// Path is the file of channel id under dir (the File that
// messages.LogChannels lists for it).
func Path(dir, id string) string { return filepath.Join(dir, id+".log") }

// Receive handles one message.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		_ = os.MkdirAll(a.dir, 0o700)
		a.w = writerFor(Path(a.dir, a.id))
	case *actor.Stopping, *actor.Restarting:
		if a.w != nil {
			_ = a.w.Close()
		}
	case *messages.LogLine:
		if err := a.write([]byte(m.Message + "\n")); err != nil {
			a.writeFailed(err, 1)
			return
		}
		a.writeOK()
		a.seq++
		line := *m // the sender's message is not ours to change
		line.Seq = a.seq
		c.ActorSystem().EventStream.Publish(&line)
	case *messages.LogBatch:
		// The batch's text goes to the file as it is; then it is
		// numbered and published as the one batch (an event per line
		// cost every subscriber a call, and the WebSocket hub a mailbox
		// message, for each line of a busy writer), and this actor's
		// reference to it given back (messages.LogBatch).
		defer m.Release()
		if err := a.write(m.Text); err != nil {
			a.writeFailed(err, m.Len())
			return
		}
		a.writeOK()
		m.Seq = a.seq + 1
		a.seq += uint64(m.Len())
		c.ActorSystem().EventStream.Publish(m)
	case *messages.GetLogTail:
		// Lines up to Seq are in the file: live subscribers drop those.
		lines, err := tailFile(Path(a.dir, a.id), m.Lines)
		c.Respond(&messages.GetLogTailReply{Lines: lines, Seq: a.seq, Err: err})
	}
}

// tailFile returns the last n lines of path (an empty list when the file
// does not exist yet). It reads backwards in blocks, each read and
// scanned once, so a tail of a big file costs only what it returns.
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
	var chunks [][]byte // newest first
	pos, newlines, size := st.Size(), 0, 0
	for pos > 0 && newlines <= n {
		step := int64(block)
		if pos < step {
			step = pos
		}
		pos -= step
		chunk := make([]byte, step)
		if _, err := f.ReadAt(chunk, pos); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read log: %w", err)
		}
		chunks = append(chunks, chunk)
		newlines += bytes.Count(chunk, []byte{'\n'})
		size += len(chunk)
	}
	buf := make([]byte, 0, size)
	for i := len(chunks) - 1; i >= 0; i-- {
		buf = append(buf, chunks[i]...)
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

// write appends p, whole lines, to the file. A write that a full disk
// cut short leaves part of a line at the file's end; the next write ends
// that line first, so the lines after it are not glued to it and keep
// their fields.
func (a *Actor) write(p []byte) error {
	if a.torn {
		if _, err := a.w.Write([]byte{'\n'}); err != nil {
			return err
		}
		a.torn = false
	}
	n, err := a.w.Write(p)
	if err != nil && n > 0 && p[n-1] != '\n' {
		a.torn = true
	}
	return err
}

// writeFailed reports a log file that cannot be written (a full disk)
// on stderr once, when it starts failing, not once per line; the lines
// are counted and writeOK says how many were lost once writes work again.
func (a *Actor) writeFailed(err error, lines int) {
	if a.lost == 0 {
		fmt.Fprintf(os.Stderr, "log channel %s: %v (lines are dropped until the file can be written again)\n", a.id, err)
	}
	a.lost += lines
}

func (a *Actor) writeOK() {
	if a.lost > 0 {
		fmt.Fprintf(os.Stderr, "log channel %s: writing again; %d lines were lost\n", a.id, a.lost)
		a.lost = 0
	}
}
