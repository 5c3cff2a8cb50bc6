package store

import (
	"fmt"
	"path/filepath"
	"testing"
)

// The hot path: one write (not fsynced: the fsync would measure the
// disk) and one read of a store holding 10k keys.
func BenchmarkSet(b *testing.B) {
	db, err := Open(filepath.Join(b.TempDir(), "b.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := db.Set(fmt.Sprintf("k%05d", i%10000), "value"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	db, err := Open(filepath.Join(b.TempDir(), "b.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 10000; i++ {
		if err := db.Set(fmt.Sprintf("k%05d", i), "value"); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := db.Get(fmt.Sprintf("k%05d", i%10000)); err != nil {
			b.Fatal(err)
		}
	}
}
