package logs

import (
	"fmt"
	"testing"
)

func seqs(es []Entry) string {
	s := ""
	for _, e := range es {
		s += fmt.Sprintf("%d:%s ", e.Seq, e.Message)
	}
	return s
}

// TestRingGrowsThenWraps: the buffer grows with the entries up to the
// capacity, then drops the oldest; a jump in sequence (a trail loaded
// after a trim) keeps paging right.
func TestRingGrowsThenWraps(t *testing.T) {
	r := NewRing(4)
	add := func(msgs ...string) {
		for _, m := range msgs {
			r.Add(Entry{Message: m})
		}
	}
	add("a", "b")
	if got, _ := r.Before(0, 10, nil); seqs(got) != "2:b 1:a " || cap(r.buf) > 4 {
		t.Fatalf("two entries: %q (cap %d)", seqs(got), cap(r.buf))
	}
	add("c", "d", "e", "f")
	if got, _ := r.Before(0, 10, nil); seqs(got) != "6:f 5:e 4:d 3:c " {
		t.Fatalf("after wrapping: %q", seqs(got))
	}
	if got, more := r.Before(5, 1, nil); seqs(got) != "4:d " || !more {
		t.Fatalf("page before 5: %q more %v", seqs(got), more)
	}

	j := NewRing(4)
	j.Add(Entry{Message: "x"})
	j.next = 100 // what the audit trail does when it loads a trimmed file
	j.Add(Entry{Message: "y"})
	j.Add(Entry{Message: "z"})
	if got, _ := j.Before(0, 10, nil); seqs(got) != "101:z 100:y " || j.Len() != 2 {
		t.Fatalf("after a jump: %q (len %d)", seqs(got), j.Len())
	}
	l := NewRing(3)
	l.next = 500
	for _, m := range []string{"p", "q", "r", "s"} {
		l.Add(Entry{Message: m})
	}
	if got, _ := l.Before(0, 10, nil); seqs(got) != "503:s 502:r 501:q " {
		t.Fatalf("starting at 500: %q", seqs(got))
	}
}
