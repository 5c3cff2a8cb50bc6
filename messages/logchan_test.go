package messages

import (
	"testing"
	"time"
)

// A batch's lines come out as they went in, numbered from the batch's
// Seq, and outlive the batch: its text may be written over once it is
// released.
func TestLogBatchLines(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	b := NewLogBatch("httpProxy", "INFO")
	for i, s := range []string{"one", "", "three"} {
		b.Text = append(b.Text, s...)
		b.EndLine(at.Add(time.Duration(i) * time.Second))
	}
	b.Seq = 41
	ls := b.Lines()
	copy(b.Text, "XXXXXXXXXX") // the batch's text written over, as its next writer would
	b.Release()
	want := []string{"one", "", "three"}
	if len(ls) != len(want) || b.Len() != 0 {
		t.Fatalf("%d lines, want %d; %d left in the released batch", len(ls), len(want), b.Len())
	}
	for i, l := range ls {
		if l.Message != want[i] || l.Seq != 41+uint64(i) || !l.Time.Equal(at.Add(time.Duration(i)*time.Second)) ||
			l.Channel != "httpProxy" || l.Level != "INFO" {
			t.Errorf("line %d: %+v, want %q numbered %d", i, *l, want[i], 41+i)
		}
	}
}

// A batch goes back only with its last reference, and giving back one
// more than was taken is a bug that says so.
func TestLogBatchReferences(t *testing.T) {
	b := NewLogBatch("core", "INFO")
	b.Text = append(b.Text, "kept"...)
	b.EndLine(time.Now())
	b.Retain()
	b.Release()
	if b.Len() != 1 || string(b.Text) != "kept\n" || b.Channel != "core" {
		t.Fatalf("a batch still held was reset: %d lines, %q", b.Len(), b.Text)
	}
	b.Release()
	if b.Len() != 0 || len(b.Text) != 0 || b.Channel != "" {
		t.Fatalf("the last release left %d lines, %q", b.Len(), b.Text)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a release past the last reference went unnoticed")
		}
	}()
	var never LogBatch // from no NewLogBatch: no reference to give back
	never.Release()
}
