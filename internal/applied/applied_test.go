package applied

import (
	"fmt"
	"sync"
	"testing"
)

func TestVector(t *testing.T) {
	var v Vector
	if v.Has("a", 1) {
		t.Fatal("empty vector has a:1")
	}
	v.Advance("a", 5)
	v.Advance("a", 3) // never lowers
	for _, tt := range []struct {
		w    string
		seq  uint64
		want bool
	}{{"a", 1, true}, {"a", 5, true}, {"a", 6, false}, {"b", 1, false}} {
		if got := v.Has(tt.w, tt.seq); got != tt.want {
			t.Errorf("Has(%s, %d) = %v, want %v", tt.w, tt.seq, got, tt.want)
		}
	}
	var nilv *Vector
	nilv.Advance("a", 1)
	if nilv.Has("a", 1) {
		t.Fatal("nil vector has a:1")
	}
}

// TestVectorConcurrent: advances from many goroutines end on the highest
// value (run with -race).
func TestVectorConcurrent(t *testing.T) {
	var v Vector
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := uint64(1); i <= 1000; i++ {
				v.Advance(fmt.Sprint("w", i%3), i*uint64(g+1))
				v.Has("w1", i)
			}
		}(g)
	}
	wg.Wait()
	if !v.Has("w1", 8000) || v.Has("w1", 8001) {
		t.Fatal("w1 does not end at 8000")
	}
}
