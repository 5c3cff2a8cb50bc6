package stack

import (
	"sync"
	"testing"
	"time"
)

// deep recurses n frames of about 100 bytes each, like a message's way
// down a decoder and a signature check.
//
//go:noinline
func deep(n int) byte {
	var pad [96]byte
	pad[n%96] = byte(n)
	if n == 0 {
		return pad[0]
	}
	return deep(n-1) + pad[n%96]
}

// Schedule returns before fn has run (fn runs on a goroutine of its
// own, as protoactor's default dispatcher's does), and every fn runs.
func TestDispatcherRunsEachFnOnItsOwnGoroutine(t *testing.T) {
	d := Actors
	if d.Throughput() != 300 {
		t.Fatalf("throughput %d, want protoactor's default 300", d.Throughput())
	}
	release, ran := make(chan struct{}), make(chan bool, 1)
	d.Schedule(func() {
		select {
		case <-release: // Schedule returned first: it did not wait for fn
			ran <- true
		case <-time.After(10 * time.Second):
			ran <- false
		}
	})
	close(release)
	if !<-ran {
		t.Fatal("fn ran inside Schedule, not on a goroutine of its own")
	}
	got := make(chan int, 100)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		d.Schedule(func() {
			defer wg.Done()
			deep(100) // ~10 KiB below Grow's frame
			got <- i
		})
	}
	wg.Wait()
	close(got)
	seen := map[int]bool{}
	for i := range got {
		seen[i] = true
	}
	if len(seen) != 100 {
		t.Fatalf("%d of 100 scheduled functions ran", len(seen))
	}
}

// BenchmarkGoroutine compares a short-lived goroutine on the runtime's
// growth with one that grows first, going ~10 KiB deep (deep) or not at
// all (shallow: what Grow costs a goroutine that did not need it).
func BenchmarkGoroutine(b *testing.B) {
	for _, c := range []struct {
		name   string
		frames int
		grow   bool
	}{{"deep/runtime", 100, false}, {"deep/grown", 100, true}, {"shallow/runtime", 0, false}, {"shallow/grown", 0, true}} {
		b.Run(c.name, func(b *testing.B) {
			done := make(chan struct{})
			for b.Loop() {
				go func() {
					if c.grow {
						Grow()
					}
					deep(c.frames)
					done <- struct{}{}
				}()
				<-done
			}
		})
	}
}
