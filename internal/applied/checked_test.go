package applied

import (
	"fmt"
	"testing"
)

// A check is taken only for the same writer, seq, signed content and
// signature; anything else misses.
func TestCheckedMatchesWholeOps(t *testing.T) {
	var c Checked
	sum := Sum([]byte("op body"), []byte("sig"))
	if c.Has("w", 1, sum) {
		t.Fatal("empty cache has an entry")
	}
	c.Add("w", 1, sum)
	if !c.Has("w", 1, sum) {
		t.Fatal("the op just added is not there")
	}
	for name, miss := range map[string]func() bool{
		"other content":   func() bool { return c.Has("w", 1, Sum([]byte("op bodY"), []byte("sig"))) },
		"other signature": func() bool { return c.Has("w", 1, Sum([]byte("op body"), []byte("siG"))) },
		"other seq":       func() bool { return c.Has("w", 2, sum) },
		"other writer":    func() bool { return c.Has("v", 1, sum) },
	} {
		if miss() {
			t.Errorf("%s: taken on the check of another op", name)
		}
	}
	if Sum([]byte("op bodys"), []byte("ig")) == Sum([]byte("op body"), []byte("sig")) {
		t.Error("the same bytes split otherwise hash alike")
	}
	if !c.Seen("w", 1) || c.Seen("w", 2) || c.Seen("v", 1) {
		t.Error("Seen answers for other ops than the one added")
	}
	var nilC *Checked
	nilC.Add("w", 1, sum)
	if nilC.Has("w", 1, sum) || nilC.Seen("w", 1) {
		t.Fatal("a nil cache remembered")
	}
}

// Memory is bounded by two generations: the oldest entries go, the
// recent ones stay.
func TestCheckedIsBounded(t *testing.T) {
	var c Checked
	sum := func(i int) [32]byte { return Sum([]byte(fmt.Sprint(i)), nil) }
	n := 3 * CheckedGeneration
	for i := range n {
		c.Add("w", uint64(i), sum(i))
	}
	if got := len(c.cur) + len(c.old); got > 2*CheckedGeneration {
		t.Fatalf("%d entries kept, bound %d", got, 2*CheckedGeneration)
	}
	if c.Has("w", 0, sum(0)) {
		t.Error("the first entry outlived two generations")
	}
	if !c.Has("w", uint64(n-1), sum(n-1)) {
		t.Error("the last entry is gone")
	}
}
