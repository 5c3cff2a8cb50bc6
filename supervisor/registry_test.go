package supervisor

import (
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A node asks its actors all the time (every admin read, every stats
// push); each ask registers a future in the process registry and removes
// it when answered. After the first few thousand asks, the next 100,000
// must not grow the heap: with protoactor's default 32 shards per bucket
// they grew it by about 8.6 MiB (the registry's 32,768 Go maps each
// keeping the memory of their first entry), and a node under steady load
// showed that as RSS rising for hours.
func TestAsksDoNotGrowTheRegistry(t *testing.T) {
	r := NewRoot(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer r.System.Shutdown()
	echo, err := r.Spawn("echo", actor.PropsFromFunc(func(c actor.Context) {
		if n, ok := c.Message().(int); ok {
			c.Respond(n)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	ask := func(n int) {
		for i := 0; i < n; i++ {
			got, err := r.System.Root.RequestFuture(echo, i, 10*time.Second).Result()
			if err != nil || got != i {
				t.Fatalf("ask %d: %v %v", i, got, err)
			}
		}
	}
	ask(5_000)
	before := heapAlloc()
	ask(100_000)
	after := heapAlloc()
	grew := int64(after) - int64(before)
	t.Logf("heap %d -> %d bytes (%+d) over 100,000 asks", before, after, grew)
	if grew > 2<<20 {
		t.Fatalf("100,000 answered asks grew the heap by %d bytes (more than 2 MiB): the process registry keeps memory for futures that are gone", grew)
	}
}
