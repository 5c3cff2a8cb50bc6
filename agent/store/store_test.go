package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func testChart(id string, dims ...string) *ChartDef {
	c := &ChartDef{ID: id, Title: "test " + id, Units: "things", ChartType: "line", Priority: 100}
	for _, d := range dims {
		c.Dims = append(c.Dims, DimDef{ID: d})
	}
	return c
}

func newTestDB(t *testing.T, cfg Config) *DB {
	t.Helper()
	db, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustAppend(t *testing.T, db *DB, id string, ts int64, v ...float64) {
	t.Helper()
	if err := db.Append(id, ts, v); err != nil {
		t.Fatalf("Append(%q, %d): %v", id, ts, err)
	}
}

func pt(v float64) Agg { return Agg{Min: v, Max: v, Sum: v, Count: 1} }

func checkWindow(t *testing.T, w *Window, start int64, want [][]Agg) {
	t.Helper()
	if w.Start != start {
		t.Errorf("Start = %d, want %d", w.Start, start)
	}
	if len(w.Slots) != len(want) {
		t.Fatalf("%d dims, want %d", len(w.Slots), len(want))
	}
	for d := range want {
		if len(w.Slots[d]) != len(want[d]) {
			t.Fatalf("dim %d: %d slots, want %d: %+v", d, len(w.Slots[d]), len(want[d]), w.Slots[d])
		}
		for i := range want[d] {
			if w.Slots[d][i] != want[d][i] {
				t.Errorf("dim %d slot %d = %+v, want %+v", d, i, w.Slots[d][i], want[d][i])
			}
		}
	}
}

func TestTier0Window(t *testing.T) {
	db := newTestDB(t, Config{})
	if err := db.Register(testChart("a.b", "x", "y")); err != nil {
		t.Fatal(err)
	}
	for ts := int64(1000); ts < 1010; ts++ {
		if ts == 1005 {
			continue // a missed second is a gap
		}
		y := float64(ts - 1000)
		if ts == 1003 {
			y = math.NaN()
		}
		mustAppend(t, db, "a.b", ts, float64(ts), y)
	}
	gap := Agg{}
	tests := []struct {
		name          string
		after, before int64
		start         int64
		want          [][]Agg
	}{
		{"inside", 1002, 1006, 1002, [][]Agg{
			{pt(1002), pt(1003), pt(1004), gap, pt(1006)},
			{pt(2), gap, pt(4), gap, pt(6)},
		}},
		{"clamped both ends", 900, 2000, 1000, [][]Agg{
			{pt(1000), pt(1001), pt(1002), pt(1003), pt(1004), gap, pt(1006), pt(1007), pt(1008), pt(1009)},
			{pt(0), pt(1), pt(2), gap, pt(4), gap, pt(6), pt(7), pt(8), pt(9)},
		}},
		{"one second", 1009, 1009, 1009, [][]Agg{{pt(1009)}, {pt(9)}}},
		{"before data", 10, 999, 10, [][]Agg{{}, {}}},
		{"after data", 1010, 1100, 1010, [][]Agg{{}, {}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := db.Query("a.b", 0, tt.after, tt.before)
			if err != nil {
				t.Fatal(err)
			}
			if w.Step != 1 || w.Tier != 0 || w.ChartID != "a.b" || len(w.Dims) != 2 || w.Dims[1] != "y" {
				t.Errorf("window header = %+v", w)
			}
			checkWindow(t, w, tt.start, tt.want)
		})
	}
	ts, vals, ok := db.Latest("a.b")
	if !ok || ts != 1009 || vals[0] != 1009 || vals[1] != 9 {
		t.Errorf("Latest = %d %v %v, want 1009 [1009 9] true", ts, vals, ok)
	}
}

func TestTier0RingWraps(t *testing.T) {
	db := newTestDB(t, Config{Tier0Retention: 10 * time.Second})
	db.Register(testChart("r", "v"))
	for ts := int64(1000); ts <= 1025; ts++ {
		mustAppend(t, db, "r", ts, float64(ts))
	}
	w, err := db.Query("r", 0, 0, 5000)
	if err != nil {
		t.Fatal(err)
	}
	var want []Agg
	for ts := int64(1016); ts <= 1025; ts++ {
		want = append(want, pt(float64(ts)))
	}
	checkWindow(t, w, 1016, [][]Agg{want})

	// A jump longer than the ring forgets everything before it.
	mustAppend(t, db, "r", 1100, 7)
	w, _ = db.Query("r", 0, 0, 5000)
	checkWindow(t, w, 1100, [][]Agg{{pt(7)}})
	// A short jump leaves gaps, not stale values from the last lap.
	mustAppend(t, db, "r", 1104, 8)
	w, _ = db.Query("r", 0, 0, 5000)
	checkWindow(t, w, 1100, [][]Agg{{pt(7), {}, {}, {}, pt(8)}})
	if st := db.Stats(); st.FirstTime != 1100 || st.LastTime != 1104 || st.Tier0BytesPerDim != 2*(64*4+12)+16 { // a 10 s ring is two dense 64 s blocks at worst, plus their 128 anomaly bits
		t.Errorf("Stats = %+v", st)
	}
}

func TestTier1Aggregation(t *testing.T) {
	db := newTestDB(t, Config{})
	db.Register(testChart("agg", "v", "sparse"))
	// Minutes 100, 101 full; minute 102 has 30 points. Value = second in minute.
	base := int64(100 * 60)
	for ts := base; ts < base+150; ts++ {
		s := math.NaN()
		if ts%60 < 10 {
			s = 1
		}
		mustAppend(t, db, "agg", ts, float64(ts%60), s)
	}
	w, err := db.Query("agg", 1, base+30, base+1000) // after in the middle of minute 100
	if err != nil {
		t.Fatal(err)
	}
	full := Agg{Min: 0, Max: 59, Sum: 59 * 60 / 2, Count: 60}
	part := Agg{Min: 0, Max: 29, Sum: 29 * 30 / 2, Count: 30}
	ten := Agg{Min: 1, Max: 1, Sum: 10, Count: 10}
	if w.Step != 60 {
		t.Errorf("Step = %d", w.Step)
	}
	checkWindow(t, w, base, [][]Agg{{full, full, part}, {ten, ten, ten}})

	w, _ = db.Query("agg", 1, base+60, base+60)
	checkWindow(t, w, base+60, [][]Agg{{full}, {ten}})
}

func TestTier1Retention(t *testing.T) {
	db := newTestDB(t, Config{Tier1Retention: 3 * time.Minute})
	db.Register(testChart("ret", "v"))
	base := int64(1000 * 60)
	for ts := base; ts < base+10*60; ts++ {
		mustAppend(t, db, "ret", ts, 1)
	}
	w, _ := db.Query("ret", 1, 0, base+100*60)
	// Minute 1009 is open; 1007 and 1008 are closed: 3 minutes in all.
	one := Agg{Min: 1, Max: 1, Sum: 60, Count: 60}
	checkWindow(t, w, (base/60+7)*60, [][]Agg{{one, one, one}})
	s := db.lookup("ret")
	if len(s.chunks) > 2 {
		t.Errorf("%d chunks kept for a 3-minute retention", len(s.chunks))
	}
}

func TestErrors(t *testing.T) {
	db := newTestDB(t, Config{})
	if err := db.Register(testChart("e", "v")); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, db, "e", 100, 1)
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"append unknown", db.Append("nope", 1, []float64{1}), ErrNotFound},
		{"append old", db.Append("e", 100, []float64{1}), ErrOld},
		{"query unknown", func() error { _, err := db.Query("nope", 0, 0, 1); return err }(), ErrNotFound},
		{"query tier 2", func() error { _, err := db.Query("e", 2, 0, 1); return err }(), ErrBadTier},
		{"query range", func() error { _, err := db.Query("e", 0, 5, 1); return err }(), ErrBadRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) {
				t.Errorf("err = %v, want %v", tt.err, tt.want)
			}
		})
	}
	for _, bad := range []*ChartDef{nil, {}, {ID: "x"}, testChart("x", "a", "a"), testChart("x", "")} {
		if err := db.Register(bad); err == nil {
			t.Errorf("Register(%+v) = nil, want error", bad)
		}
	}
	if err := db.Append("e", 101, []float64{1, 2}); err == nil {
		t.Error("Append with 2 values for 1 dim = nil, want error")
	}
	if _, err := Open(Config{Tier0Retention: time.Millisecond}); err == nil {
		t.Error("Open with 1ms retention = nil, want error")
	}
	db.Close()
	if err := db.Append("e", 200, []float64{1}); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close = %v", err)
	}
}

func TestRegisterDefaultsAndReplace(t *testing.T) {
	db := newTestDB(t, Config{})
	db.Register(&ChartDef{ID: "system.x", Priority: 5, Dims: []DimDef{{ID: "a"}}})
	db.Register(&ChartDef{ID: "aaa.y", Priority: 5, Dims: []DimDef{{ID: "a"}}})
	db.Register(&ChartDef{ID: "zzz", Priority: 1, Dims: []DimDef{{ID: "a"}}})
	c, ok := db.Chart("system.x")
	if !ok || c.Name != "system.x" || c.Type != "system" || c.Context != "system.x" || c.UpdateEvery != 1 ||
		c.Dims[0].Name != "a" || c.Dims[0].Algorithm != "absolute" || c.Dims[0].Multiplier != 1 || c.Dims[0].Divisor != 1 {
		t.Errorf("Chart = %+v", c)
	}
	var ids []string
	for _, c := range db.Charts() {
		ids = append(ids, c.ID)
	}
	if fmt.Sprint(ids) != "[zzz aaa.y system.x]" {
		t.Errorf("Charts order = %v", ids)
	}
	mustAppend(t, db, "zzz", 10, 1)
	db.Register(&ChartDef{ID: "zzz", Title: "new title", Dims: []DimDef{{ID: "a"}}})
	if _, _, ok := db.Latest("zzz"); !ok {
		t.Error("same dims: data dropped")
	}
	db.Register(&ChartDef{ID: "zzz", Dims: []DimDef{{ID: "a"}, {ID: "b"}}})
	if _, _, ok := db.Latest("zzz"); ok {
		t.Error("new dims: old data kept")
	}
	mustAppend(t, db, "zzz", 5, 1, 2)
}

func TestRestartKeepsTier1(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	db.Register(testChart("p.q", "a", "b"))
	db.Register(testChart("gone", "a"))
	now := time.Now().Unix()
	base := (now/60 - 10) * 60
	for ts := base; ts < base+150; ts++ {
		mustAppend(t, db, "p.q", ts, float64(ts%60), -1)
	}
	before, err := db.Query("p.q", 1, base, base+1000)
	if err != nil || len(before.Slots[0]) != 3 {
		t.Fatalf("tier 1 before restart: %+v, %v; want 3 minutes", before, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db2 := newTestDB(t, Config{Dir: dir})
	if _, ok := db2.Chart("gone"); ok {
		t.Error("chart without tier-1 data survived the restart")
	}
	c, ok := db2.Chart("p.q")
	if !ok || c.Title != "test p.q" {
		t.Fatalf("Chart after restart = %+v, %v", c, ok)
	}
	after, err := db2.Query("p.q", 1, base, base+1000)
	if err != nil {
		t.Fatal(err)
	}
	checkWindow(t, after, base, before.Slots)
	if st := db2.Stats(); st.Tier1First != base || st.Tier1Last != base+120 || st.Tier1DiskBytes == 0 {
		t.Errorf("Stats after restart = %+v", st)
	}

	// The collector goes on in the same minute: the two parts merge.
	db2.Register(testChart("p.q", "a", "b"))
	for ts := base + 150; ts < base+180; ts++ {
		mustAppend(t, db2, "p.q", ts, float64(ts%60), -1)
	}
	full := Agg{Min: 0, Max: 59, Sum: 59 * 60 / 2, Count: 60}
	neg := Agg{Min: -1, Max: -1, Sum: -60, Count: 60}
	w, _ := db2.Query("p.q", 1, base+120, base+120)
	checkWindow(t, w, base+120, [][]Agg{{full}, {neg}})
	db2.Close()

	db3 := newTestDB(t, Config{Dir: dir})
	w, _ = db3.Query("p.q", 1, base, base+1000)
	checkWindow(t, w, base, [][]Agg{{full, full, full}, {neg, neg, neg}})
}

func TestCorruptTail(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Register(testChart("c", "v")); err != nil {
		t.Fatal(err)
	}
	base := (time.Now().Unix()/60 - 5) * 60
	for ts := base; ts < base+120; ts++ {
		mustAppend(t, db, "c", ts, 2)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	good, err := os.ReadFile(path)
	if err != nil || len(good) <= len(fileMagic) {
		t.Fatalf("tier-1 file after Close: %d bytes, %v", len(good), err)
	}
	// A torn record at the end, as a crash mid-write leaves it.
	if err := os.WriteFile(path, append(good, 'M', 40, 1, 2, 3), 0o600); err != nil {
		t.Fatal(err)
	}

	db2 := newTestDB(t, Config{Dir: dir})
	two := Agg{Min: 2, Max: 2, Sum: 120, Count: 60}
	w, _ := db2.Query("c", 1, base, base+1000)
	checkWindow(t, w, base, [][]Agg{{two, two}})
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:len(fileMagic)], []byte(fileMagic)) || len(got) > len(good) {
		t.Errorf("file not rewritten without the torn tail: %d bytes, had %d", len(got), len(good))
	}

	bad := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(bad, []byte("something else entirely"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{Dir: filepath.Dir(bad)}); err == nil {
		t.Error("Open on a foreign file = nil, want error")
	}
}

func TestCompactionKeepsData(t *testing.T) {
	dir := t.TempDir()
	db := newTestDB(t, Config{Dir: dir})
	db.Register(testChart("k", "v"))
	base := (time.Now().Unix()/60 - 30) * 60
	for ts := base; ts < base+20*60; ts++ {
		mustAppend(t, db, "k", ts, 3)
	}
	if err := db.flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.compact(); err != nil {
		t.Fatal(err)
	}
	for ts := base + 20*60; ts < base+21*60+1; ts++ {
		mustAppend(t, db, "k", ts, 3)
	}
	db.Close()
	db2 := newTestDB(t, Config{Dir: dir})
	w, _ := db2.Query("k", 1, base, base+10000)
	if len(w.Slots[0]) != 22 {
		t.Fatalf("%d minutes after compaction and restart, want 22", len(w.Slots[0]))
	}
	three := Agg{Min: 3, Max: 3, Sum: 180, Count: 60}
	for i, g := range w.Slots[0][:21] {
		if g != three {
			t.Errorf("minute %d = %+v", i, g)
		}
	}
	if g := w.Slots[0][21]; g.Count != 1 {
		t.Errorf("last minute = %+v, want 1 point", g)
	}
}

func TestConcurrentAppendQuery(t *testing.T) {
	db := newTestDB(t, Config{Dir: t.TempDir(), Tier0Retention: 2 * time.Minute})
	const charts = 4
	for c := 0; c < charts; c++ {
		db.Register(testChart(fmt.Sprintf("c%d", c), "a", "b", "c"))
	}
	base := (time.Now().Unix()/60 - 10) * 60
	var wg sync.WaitGroup
	for c := 0; c < charts; c++ {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			for ts := base; ts < base+600; ts++ {
				if err := db.Append(id, ts, []float64{1, 2, 3}); err != nil {
					t.Error(err)
					return
				}
			}
		}(fmt.Sprintf("c%d", c))
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for r := 0; r < 2; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for c := 0; c < charts; c++ {
					id := fmt.Sprintf("c%d", c)
					w, err := db.Query(id, r%2, base, base+600)
					if err != nil {
						t.Error(err)
						return
					}
					for _, row := range w.Slots {
						if len(row) != len(w.Slots[0]) {
							t.Error("ragged window")
						}
					}
					db.Latest(id)
				}
				db.Stats()
				db.Charts()
				db.flush()
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	w, _ := db.Query("c3", 1, base, base+600)
	if n := len(w.Slots[0]); n != 10 {
		t.Errorf("%d tier-1 minutes, want 10", n)
	}
	if st := db.Stats(); st.Charts != charts || st.Dimensions != 3*charts || st.MemoryBytes == 0 {
		t.Errorf("Stats = %+v", st)
	}
}

func FuzzReplay(f *testing.F) {
	var seed []byte
	seed = append(seed, fileMagic...)
	seed = appendChartRecord(seed, 0, normalize(testChart("f", "a", "b")))
	seed = appendMinuteRecord(seed, 0, 1000, []accum{{min: 1, max: 2, sum: 3, count: 2}, {}})
	f.Add(seed)
	f.Add([]byte(fileMagic))
	f.Add(append([]byte(fileMagic), 'M', 200, 200, 200, 200, 1))
	f.Add(seed[:len(seed)-3])
	f.Fuzz(func(t *testing.T, data []byte) {
		db := &DB{n: 60, m: 5, chunkLen: 5, byID: map[string]*lockedSeries{}}
		db.replay(bufio.NewReader(bytes.NewReader(data)), time.Unix(1000*60, 0))
		for _, s := range db.byID {
			w := &Window{}
			s.tier1Window(w, 0, math.MaxInt32)
			for _, row := range w.Slots {
				if len(row) != len(w.Slots[0]) {
					t.Fatal("ragged window")
				}
			}
		}
	})
}

func TestTier1SealedChunks(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Tier1Retention: 30 * time.Minute}
	db, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db.chunkLen = 7 // days are 1440 minutes; here chunks of 7 get sealed often
	db.Register(testChart("s", "v", "w"))
	base := (time.Now().Unix()/60 - 49) * 60 // the last minute is the current one
	want := map[int64]Agg{}
	for ts := base; ts < base+50*60; ts++ {
		v := float64(ts%97) + 0.5
		mustAppend(t, db, "s", ts, v, -v)
		m := ts / 60 * 60
		a := want[m]
		if a.Count == 0 || v < a.Min {
			a.Min = v
		}
		a.Max = max(a.Max, v)
		a.Sum += v
		a.Count++
		want[m] = a
	}
	check := func(db *DB, when string) {
		t.Helper()
		w, err := db.Query("s", 1, 0, base+100*60)
		if err != nil {
			t.Fatal(err)
		}
		if w.Start != base+20*60 || len(w.Slots[0]) != 30 {
			t.Fatalf("%s: window starts %d with %d minutes, want %d and 30", when, w.Start, len(w.Slots[0]), base+20*60)
		}
		for i, g := range w.Slots[0] {
			e := want[w.Start+int64(i)*60]
			if g.Min != e.Min || g.Max != e.Max || math.Abs(g.Sum-e.Sum) > 1e-3*e.Sum || g.Count != e.Count {
				t.Errorf("%s: minute %d = %+v, want %+v", when, i, g, e)
			}
			if n := w.Slots[1][i]; n.Max != -e.Min || n.Count != e.Count {
				t.Errorf("%s: minute %d of w = %+v", when, i, n)
			}
		}
	}
	packed := 0
	for _, c := range db.lookup("s").chunks {
		if c.packed != nil {
			packed++
		}
	}
	if packed == 0 {
		t.Fatal("no chunk was sealed")
	}
	check(db, "live")
	if st := db.Stats(); st.Tier1BytesPerDim <= 0 {
		t.Errorf("Tier1BytesPerDim = %d", st.Tier1BytesPerDim)
	}
	db.Close()
	db2 := newTestDB(t, cfg)
	check(db2, "after restart")
}

func TestChunkPackRoundTrip(t *testing.T) {
	c := newChunk(3, 0, 50)
	for i := range c.count {
		if i%7 == 0 {
			continue // a gap
		}
		c.min[i], c.max[i], c.sum[i] = float32(i)-0.25, float32(i*i), float32(-i)*1e6
		c.count[i], c.anom[i] = uint8(i%61), uint8(i%3)
	}
	want := newChunk(3, 0, 50)
	copy(want.min, c.min)
	copy(want.max, c.max)
	copy(want.sum, c.sum)
	copy(want.count, c.count)
	copy(want.anom, c.anom)
	c.seal()
	if c.min != nil || len(c.packed) == 0 || c.bytes() != cap(c.packed) {
		t.Fatalf("sealed chunk keeps arrays or has no packed bytes")
	}
	for _, got := range []*chunk{c.view(), func() *chunk { c.unseal(); return c }()} {
		for i := range want.count {
			if got.min[i] != want.min[i] || got.max[i] != want.max[i] || got.sum[i] != want.sum[i] ||
				got.count[i] != want.count[i] || got.anom[i] != want.anom[i] {
				t.Fatalf("slot %d = %v %v %v %d %d, want %v %v %v %d %d", i, got.min[i], got.max[i], got.sum[i],
					got.count[i], got.anom[i], want.min[i], want.max[i], want.sum[i], want.count[i], want.anom[i])
			}
		}
	}
	if c.packed != nil {
		t.Error("unseal left the packed bytes")
	}
}

func TestRemove(t *testing.T) {
	db := newTestDB(t, Config{})
	if err := db.Register(testChart("net.eth1", "received", "sent")); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, db, "net.eth1", 100, 1, 2)
	if !db.Remove("net.eth1") {
		t.Fatal("Remove(net.eth1) = false, want true")
	}
	if db.Remove("net.eth1") {
		t.Error("second Remove(net.eth1) = true, want false")
	}
	if _, ok := db.Chart("net.eth1"); ok {
		t.Error("removed chart still listed")
	}
	if len(db.Charts()) != 0 {
		t.Errorf("Charts() = %d, want 0", len(db.Charts()))
	}
	if err := db.Append("net.eth1", 101, []float64{1, 2}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Append after Remove = %v, want ErrNotFound", err)
	}
	// the device returns: a new chart, empty
	if err := db.Register(testChart("net.eth1", "received", "sent")); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, db, "net.eth1", 102, 3, 4)
	w, err := db.Query("net.eth1", 0, 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	checkWindow(t, w, 102, [][]Agg{{pt(3)}, {pt(4)}})
}

// PointsStored counts a tier-0 point per dimension per append and a
// tier-1 point per dimension with data per closed minute.
func TestPointsStored(t *testing.T) {
	db := newTestDB(t, Config{})
	if err := db.Register(testChart("c", "a", "b")); err != nil {
		t.Fatal(err)
	}
	for ts := int64(60); ts < 120; ts++ { // one minute
		mustAppend(t, db, "c", ts, 1, math.NaN())
	}
	if t0, t1 := db.PointsStored(); t0 != 120 || t1 != 0 {
		t.Fatalf("within the minute: tier0 %d tier1 %d, want 120 and 0", t0, t1)
	}
	mustAppend(t, db, "c", 120, 1, 2) // closes minute 1: only "a" had data
	if t0, t1 := db.PointsStored(); t0 != 122 || t1 != 1 {
		t.Fatalf("after the minute: tier0 %d tier1 %d, want 122 and 1", t0, t1)
	}
}

// QueryFor counts a query and the slots it read for its reader; a query
// that fails counts nothing.
func TestQueryForCounts(t *testing.T) {
	db := newTestDB(t, Config{})
	if err := db.Register(testChart("c", "a", "b")); err != nil {
		t.Fatal(err)
	}
	for ts := int64(100); ts < 110; ts++ {
		mustAppend(t, db, "c", ts, 1, 2)
	}
	w, err := db.QueryFor(ReadHealth, "c", 0, 100, 109)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.QueryFor(ReadHealth, "missing", 0, 100, 109); err == nil {
		t.Fatal("a missing chart answered")
	}
	q, p := db.Reads()
	if q[ReadHealth] != 1 || p[ReadHealth] != uint64(2*len(w.Slots[0])) || len(w.Slots[0]) != 10 {
		t.Fatalf("health: %d queries, %d points (window %d slots), want 1 and 20", q[ReadHealth], p[ReadHealth], len(w.Slots[0]))
	}
	for r := range q {
		if Reader(r) != ReadHealth && (q[r] != 0 || p[r] != 0) {
			t.Errorf("%s counted %d/%d", ReaderNames[r], q[r], p[r])
		}
	}
}

// TestQueryIntoReuses: a window passed to QueryInto again holds exactly
// what Query returns for the new chart, whatever it held before.
func TestQueryIntoReuses(t *testing.T) {
	db, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mk := func(id string, dims int) {
		d := &ChartDef{ID: id, Name: id, Context: id, UpdateEvery: 1}
		for i := 0; i < dims; i++ {
			d.Dims = append(d.Dims, DimDef{ID: string(rune('a' + i))})
		}
		if err := db.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	mk("big", 3)
	mk("small", 1)
	now := time.Now().Unix()
	for ts := now - 100; ts < now; ts++ {
		if err := db.Append("big", ts, []float64{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		if ts%2 == 0 {
			if err := db.Append("small", ts, []float64{float64(ts)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var w Window
	if err := db.QueryInto(&w, "big", 0, now-100, now); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryInto(&w, "small", 0, now-50, now); err != nil {
		t.Fatal(err)
	}
	want, _ := db.Query("small", 0, now-50, now)
	if w.ChartID != "small" || len(w.Dims) != 1 || len(w.Slots) != 1 || w.Start != want.Start || len(w.Slots[0]) != len(want.Slots[0]) {
		t.Fatalf("reused window %+v, want %+v", w, want)
	}
	for i := range want.Slots[0] {
		if w.Slots[0][i] != want.Slots[0][i] {
			t.Fatalf("slot %d = %+v, want %+v", i, w.Slots[0][i], want.Slots[0][i])
		}
	}
	if err := db.QueryInto(&w, "nope", 0, now-50, now); err == nil {
		t.Fatal("unknown chart: no error")
	}
}
