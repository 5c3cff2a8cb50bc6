package logchan

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/messages"
)

func TestTailFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	if got, err := tailFile(path, 5); err != nil || len(got) != 0 {
		t.Fatalf("tail of missing file = %v, %v", got, err)
	}
	var b strings.Builder
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 3, 5000} {
		got, err := tailFile(path, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n || got[n-1] != "line 19999" || got[0] != fmt.Sprintf("line %d", 20000-n) {
			t.Fatalf("tailFile(%d) = %d lines, first %q last %q", n, len(got), got[0], got[len(got)-1])
		}
	}
}

// A tail of long lines reads a big part of the file; what it allocates
// stays a small multiple of what it returns (the blocks it reads, the
// lines it hands out), not the square of it.
func TestTailOfLongLinesCostsWhatItReturns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	const n, width = messages.MaxLogLines, 2000 // a full rotation's worth: 10 MB
	line := strings.Repeat("x", width-1) + "\n"
	if err := os.WriteFile(path, []byte(strings.Repeat(line, n)), 0o600); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := tailFile(path, n)
	runtime.ReadMemStats(&after)
	if err != nil || len(got) != n || len(got[0]) != width-1 {
		t.Fatalf("tailFile = %d lines, %v", len(got), err)
	}
	if alloc, returned := after.TotalAlloc-before.TotalAlloc, uint64(n*width); alloc > 4*returned {
		t.Fatalf("a tail of %d bytes allocated %d MB", returned, alloc>>20)
	}
}

func TestChannelWritesTailsAndPublishes(t *testing.T) {
	dir := t.TempDir()
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	pid := sys.Root.Spawn(Props("core", dir))
	got := make(chan *messages.LogLine, 10)
	sub := sys.EventStream.Subscribe(func(e any) {
		if l, ok := e.(*messages.LogLine); ok {
			got <- l
		}
	})
	defer sys.EventStream.Unsubscribe(sub)
	log := slog.New(NewHandler(sys.Root, pid, "core", slog.LevelInfo))
	log.Debug("hidden")
	log.Info("hello", "k", "v")
	select {
	case l := <-got:
		if !strings.Contains(l.Message, "msg=hello k=v") || l.Channel != "core" || l.Level != "INFO" {
			t.Fatalf("published line = %+v", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no line published")
	}
	res, err := sys.Root.RequestFuture(pid, &messages.GetLogTail{Lines: 10}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	lines := res.(*messages.GetLogTailReply).Lines
	if len(lines) != 1 || !strings.Contains(lines[0], "hello") {
		t.Fatalf("tail = %q", lines)
	}
}

// The API lists each channel's file by name; the actor must write there.
func TestPathMatchesListedFile(t *testing.T) {
	for _, c := range Channels {
		if got := filepath.Base(Path("/x", c.ID)); got != c.File {
			t.Errorf("Path(%q) = %q, listed as %q", c.ID, got, c.File)
		}
	}
}

// Attributes added after a group go inside it, and groups nest, as
// slog.Handler asks of WithGroup and WithAttrs.
func TestHandlerNestsGroups(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	pid := sys.Root.Spawn(Props("core", t.TempDir()))
	got := make(chan string, 10)
	sub := sys.EventStream.Subscribe(func(e any) {
		if l, ok := e.(*messages.LogLine); ok {
			got <- l.Message
		}
	})
	defer sys.EventStream.Unsubscribe(sub)
	log := slog.New(NewHandler(sys.Root, pid, "core", slog.LevelInfo)).With("node", "n1")
	log.WithGroup("req").With("id", 7).Info("served", "status", 200)
	log.WithGroup("a").WithGroup("b").Info("nested", "k", 1)
	for _, want := range []string{
		"msg=served node=n1 req.id=7 req.status=200",
		"msg=nested node=n1 a.b.k=1",
	} {
		select {
		case l := <-got:
			if !strings.HasSuffix(l, want) {
				t.Errorf("line %q, want it to end in %q", l, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no line published")
		}
	}
}

// The buffer a handler formats into is kept for the next record, but not
// at the size of a huge one: a single 8 MB line must not pin 8 MB for the
// life of the node.
func TestHandlerDoesNotKeepAHugeLinesBuffer(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	pid := sys.Root.Spawn(Props("core", t.TempDir()))
	h := NewHandler(sys.Root, pid, "core", slog.LevelInfo)
	log := slog.New(h).With("node", "n1")
	log.Info("small")
	log.Info("huge", "body", strings.Repeat("x", 8<<20))
	log.Info("small again")
	h.mu.Lock()
	kept := h.buf.Cap()
	h.mu.Unlock()
	if kept > 1<<20 {
		t.Fatalf("the handler keeps a %d KiB buffer after a huge line", kept>>10)
	}
}
