package store

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	istore "peerdns/internal/store"
)

func benchDB(b *testing.B, cfg Config, dims int) (*DB, []float64) {
	b.Helper()
	db, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	names := make([]string, dims)
	vals := make([]float64, dims)
	for i := range names {
		names[i] = fmt.Sprintf("d%d", i)
		vals[i] = float64(i)
	}
	db.Register(testChart("bench", names...))
	return db, vals
}

// BenchmarkAppend is one collector point of a 10-dimension chart.
func BenchmarkAppend(b *testing.B) {
	db, vals := benchDB(b, Config{Dir: b.TempDir()}, 10)
	t0 := time.Now().Unix() - int64(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := db.Append("bench", t0+int64(i), vals); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQueryTier0Hour copies one hour of a 10-dimension chart.
func BenchmarkQueryTier0Hour(b *testing.B) {
	db, vals := benchDB(b, Config{}, 10)
	t0 := int64(1_000_000)
	for i := int64(0); i < 3600; i++ {
		db.Append("bench", t0+i, vals)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := db.Query("bench", 0, t0, t0+3599); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQueryTier1Day copies one day of minutes of a 10-dimension chart.
func BenchmarkQueryTier1Day(b *testing.B) {
	db, vals := benchDB(b, Config{}, 10)
	t0 := int64(1_000_020) * 60
	for i := int64(0); i < 86400; i += 30 { // two points a minute are enough
		db.Append("bench", t0+i, vals)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w, err := db.Query("bench", 1, t0, t0+86399)
		if err != nil || len(w.Slots[0]) != 1440 {
			b.Fatal(err)
		}
	}
}

// BenchmarkBytesPerDim fills one hour of tier 0 and one day of tier 1 and
// reports the memory held per dimension.
func BenchmarkBytesPerDim(b *testing.B) {
	for i := 0; i < b.N; i++ {
		db, vals := benchDB(b, Config{}, 10)
		t0 := int64(1_000_020) * 60
		for s := int64(0); s < 86400; s++ {
			db.Append("bench", t0+s, vals)
		}
		st := db.Stats()
		b.ReportMetric(float64(st.MemoryBytes)/float64(st.Dimensions), "bytes/dim(1h+1d)")
		b.ReportMetric(float64(st.Tier0BytesPerDim), "tier0-bytes/dim")
		b.ReportMetric(float64(st.Tier1BytesPerDim), "tier1-bytes/dim(14d)")
	}
}

// BenchmarkTier1FileVsBuntDB writes the same closed minutes (10 dims) to
// our append-only format and to buntdb via internal/store, and reports disk
// bytes per dimension-minute. buntdb also keeps every value in memory.
func BenchmarkTier1FileVsBuntDB(b *testing.B) {
	acc := make([]accum, 10)
	for d := range acc {
		acc[d] = accum{min: float64(d), max: float64(d + 1), sum: float64(60 * d), count: 60}
	}
	b.Run("file", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), FileName)
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		var buf []byte
		for i := 0; i < b.N; i++ {
			buf = appendMinuteRecord(buf[:0], 1, int64(i), acc)
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		st, _ := f.Stat()
		b.ReportMetric(float64(st.Size())/float64(b.N*len(acc)), "disk-bytes/dim-minute")
	})
	b.Run("buntdb", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "t1.db")
		db, err := istore.Open(path, istore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		for i := 0; i < b.N; i++ {
			rec := appendMinuteRecord(nil, 1, int64(i), acc)
			if err := db.Set(fmt.Sprintf("t1/1/%012d", i), base64.StdEncoding.EncodeToString(rec)); err != nil {
				b.Fatal(err)
			}
		}
		st, _ := os.Stat(path)
		b.ReportMetric(float64(st.Size())/float64(b.N*len(acc)), "disk-bytes/dim-minute")
	})
}
