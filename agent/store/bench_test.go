package store

import (
	"encoding/base64"
	"fmt"
	"math/rand"
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

// BenchmarkTier1PackedDay fills two days of one-second points of a few
// kinds of series and reports what one sealed (packed) day of tier 1 costs
// per dimension, against 20160 bytes unpacked (1440 minutes × 14 bytes).
func BenchmarkTier1PackedDay(b *testing.B) {
	kinds := []struct {
		name string
		gen  func(r *rand.Rand, prev float64) float64
	}{
		{"zeros", func(*rand.Rand, float64) float64 { return 0 }},
		{"cpu-percent", func(r *rand.Rand, _ float64) float64 { return r.Float64() * 100 }},
		{"mem-MiB-walk", func(r *rand.Rand, p float64) float64 { return p + r.Float64() - 0.5 }},
		{"rate-int", func(r *rand.Rand, _ float64) float64 { return float64(r.Intn(1000)) }},
		{"mostly-idle-rate", func(r *rand.Rand, _ float64) float64 {
			if r.Intn(20) == 0 {
				return float64(r.Intn(50))
			}
			return 0
		}},
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				db, _ := benchDB(b, Config{}, 4)
				r := rand.New(rand.NewSource(1))
				vals := []float64{20000, 20000, 20000, 20000}
				t0 := int64(1_000_000) * 1440 * 60
				for s := int64(0); s < 2*86400; s++ {
					for d := range vals {
						vals[d] = k.gen(r, vals[d])
					}
					db.Append("bench", t0+s, vals)
				}
				se := db.lookup("bench")
				packed, slots := 0, 0
				for _, c := range se.chunks {
					if c.packed != nil {
						packed += c.bytes()
						slots += c.n // dims × minutes
					}
				}
				b.ReportMetric(float64(packed)/float64(slots)*1440, "packed-bytes/dim-day")
			}
		})
	}
}
