package applied

import (
	"fmt"
	"testing"
	"time"
)

// A check is taken only for the same writer, seq, signed content and
// signature; anything else misses.
func TestCheckedMatchesWholeOps(t *testing.T) {
	var c Checked
	sum := Sum([]byte("op body"), []byte("sig"))
	if c.Has("w", 1, sum) {
		t.Fatal("empty cache has an entry")
	}
	c.Add("w", 1, sum, time.Time{})
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
	nilC.Add("w", 1, sum, time.Time{})
	nilC.Forget("w", 1)
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
		c.Add("w", uint64(i), sum(i), time.Time{})
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

// SeenSince counts only entries recorded at or after its bound, and a
// forgotten op is not seen at all.
func TestCheckedSeenSinceAndForget(t *testing.T) {
	var c Checked
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.Add("w", 1, Sum([]byte("a"), nil), t0)
	c.Add("w", 2, Sum([]byte("b"), nil), t0.Add(time.Second))
	if !c.SeenSince("w", 1, t0) || c.SeenSince("w", 1, t0.Add(time.Millisecond)) {
		t.Error("SeenSince does not follow the time an entry was added")
	}
	if !c.SeenSince("w", 2, t0.Add(time.Second)) || c.SeenSince("w", 3, t0) {
		t.Error("SeenSince answers for the wrong op")
	}
	c.Forget("w", 2)
	if c.Seen("w", 2) || c.SeenSince("w", 2, t0) || !c.Seen("w", 1) {
		t.Error("Forget did not drop exactly the op named")
	}
	// An entry in the older generation is forgotten too.
	for i := range CheckedGeneration {
		c.Add("x", uint64(i), Sum(nil, nil), t0)
	}
	if !c.Seen("w", 1) {
		t.Fatal("the entry left before the roll is gone")
	}
	c.Forget("w", 1)
	if c.Seen("w", 1) {
		t.Error("Forget left an entry of the older generation")
	}
}

// After a ledger restart, checks of ops the vector has not applied are
// dropped, in both generations; applied ones stay; a nil cache ignores
// it.
func TestCheckedForgetAbove(t *testing.T) {
	var c Checked
	var v Vector
	now := time.Now()
	v.Advance("a", 2)
	for seq := uint64(1); seq <= 4; seq++ {
		c.Add("a", seq, [32]byte{}, now)
	}
	for i := range CheckedGeneration {
		c.Add("b", uint64(i+1), [32]byte{}, now) // pushes a's entries into the older generation
	}
	c.Add("c", 1, [32]byte{}, now)
	c.ForgetAbove(&v)
	for _, k := range []struct {
		w    string
		seq  uint64
		want bool
	}{{"a", 1, true}, {"a", 2, true}, {"a", 3, false}, {"a", 4, false}, {"b", 1, false}, {"c", 1, false}} {
		if got := c.Seen(k.w, k.seq); got != k.want {
			t.Errorf("%s/%d seen %v after ForgetAbove, want %v", k.w, k.seq, got, k.want)
		}
	}
	var none *Checked
	none.ForgetAbove(&v)
}
