// Package fleet_test measures a parent agent taking in the streams of
// many children over the peer transport (real QUIC on loopback, in one
// process) and the Prometheus remote-write encoder.
package fleet_test

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"peerdns/agent/fleet"
	"peerdns/agent/remotewrite"
	"peerdns/agent/rpc"
	"peerdns/agent/store"
	"peerdns/messages"
	"peerdns/transport"
	"peerdns/transport/identity"
)

const (
	children       = 100
	chartsPerChild = 10
	dimsPerChart   = 100 // 1,000 dimensions per child
	runFor         = 15 * time.Second
)

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func chartDef(c int) *store.ChartDef {
	def := &store.ChartDef{ID: fmt.Sprintf("app.c%d", c), Units: "x"}
	for d := 0; d < dimsPerChart; d++ {
		def.Dims = append(def.Dims, store.DimDef{ID: fmt.Sprintf("d%d", d)})
	}
	return def
}

// BenchmarkParent100Children: one parent, 100 children of 1,000
// dimensions each, every child collecting and streaming at 1 Hz for 15 s.
// Reports the ingest lag (from a point's append at the child to its being
// stored at the parent), the parent's store memory, the heap, and the
// whole process's CPU (parent, children and feeder together: an upper
// bound of the parent's share; BenchmarkParentIngestBatch isolates it).
func BenchmarkParent100Children(b *testing.B) {
	for i := 0; i < b.N; i++ {
		runFleet(b)
	}
}

func runFleet(b *testing.B) {
	dir := b.TempDir()
	pid, _ := identity.Generate()
	pdb, _ := store.Open(store.Config{})
	defer pdb.Close()
	parent := fleet.NewParent(fleet.ParentConfig{Tier0Retention: 2 * time.Minute})
	defer parent.Close()
	srv, err := rpc.Listen(rpc.Config{Identity: pid, ListenAddr: "127.0.0.1:0", Dir: dir, DB: pdb, Stream: parent,
		API: func(c *fasthttp.RequestCtx) {}})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()

	type kid struct {
		key string
		db  *store.DB
	}
	kids := make([]kid, children)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Simulated seconds start just before a minute boundary, so the run
	// closes a tier-1 minute at the parent and its memory is counted.
	now := time.Now().Unix()
	// (between 5 and 65 s in the past, never ahead of the clock).
	start := now - now%60 - 5
	for k := range kids {
		id, _ := identity.Generate()
		if err := rpc.Allow(dir, id.ID(), "child"); err != nil {
			b.Fatal(err)
		}
		// The simulated children keep little: one-minute tier-1 chunks, so
		// the heap figures are mostly the parent's.
		db, _ := store.Open(store.Config{Tier0Retention: time.Minute, Tier1ChunkMinutes: 1})
		defer db.Close()
		for c := 0; c < chartsPerChild; c++ {
			if err := db.Register(chartDef(c)); err != nil {
				b.Fatal(err)
			}
		}
		cl, err := rpc.NewClient(id, "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		kids[k] = kid{key: id.ID(), db: db}
		ch := fleet.NewChild(fleet.ChildConfig{
			DB: db, Endpoint: cl.Endpoint(), ParentKey: pid.ID(), ParentAddr: srv.Addr().String(),
			Hello: messages.StreamHello{Hostname: fmt.Sprintf("child-%03d", k), GUID: fmt.Sprintf("g%d", k), NodeID: fmt.Sprintf("n%d", k)},
		})
		go ch.Run(ctx)
	}
	runtime.GC()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0, wall0 := cpuSeconds(), time.Now()

	row := make([]float64, dimsPerChart)
	var lags []time.Duration
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	b.ResetTimer()
	for ts := start; time.Since(wall0) < runFor; ts++ {
		<-tick.C
		appended := time.Now()
		for _, kd := range kids {
			for c := 0; c < chartsPerChild; c++ {
				for d := range row {
					row[d] = float64(ts%1000) + float64(d)
				}
				_ = kd.db.Append(fmt.Sprintf("app.c%d", c), ts, row)
			}
		}
		// Lag: poll until every child's last chart has second ts at the
		// parent (bounded by the next tick).
		pending := map[string]bool{}
		for _, kd := range kids {
			pending[kd.key] = true
		}
		deadline := appended.Add(3 * time.Second)
		for len(pending) > 0 && time.Now().Before(deadline) {
			for key := range pending {
				if db, ok := parent.DB(key); ok {
					if t, _, ok := db.Latest(fmt.Sprintf("app.c%d", chartsPerChild-1)); ok && t >= ts {
						lags = append(lags, time.Since(appended))
						delete(pending, key)
					}
				}
			}
			time.Sleep(5 * time.Millisecond) // polling interval of the lag probe, not synchronisation
		}
		for range pending {
			lags = append(lags, 3*time.Second) // not in within 3s: counted at the bound
		}
	}
	b.StopTimer()
	cpu := cpuSeconds() - cpu0
	wall := time.Since(wall0).Seconds()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var storeBytes int64
	dims := 0
	for _, kd := range kids {
		if db, ok := parent.DB(kd.key); ok {
			st := db.Stats()
			storeBytes += st.MemoryBytes
			dims += st.Dimensions
		}
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	p := func(q float64) float64 {
		if len(lags) == 0 {
			return math.NaN()
		}
		return float64(lags[int(q*float64(len(lags)-1))].Milliseconds())
	}
	b.ReportMetric(float64(dims), "parent-dims")
	b.ReportMetric(cpu/wall*100, "process-cpu-%")
	b.ReportMetric(p(0.5), "lag-p50-ms")
	b.ReportMetric(p(0.99), "lag-p99-ms")
	b.ReportMetric(p(1), "lag-max-ms")
	b.ReportMetric(float64(storeBytes)/(1<<20), "parent-store-MiB")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(int64(ms.HeapInuse)-int64(ms0.HeapInuse))/(1<<20), "heap-growth-MiB")
}

// pipeStream is a transport.Stream over net.Pipe, to drive the parent's
// ServeStream without the network.
type pipeStream struct{ net.Conn }

func (p pipeStream) CloseWrite() error { return nil }
func (p pipeStream) Abort()            { p.Conn.Close() }

var _ transport.Stream = pipeStream{}

// BenchmarkParentIngestBatch is the parent's own cost of one child's
// second: decode a 1,000-dimension batch, store it, ack it. 100 children
// at 1 Hz cost 100 times this per second.
func BenchmarkParentIngestBatch(b *testing.B) {
	parent := fleet.NewParent(fleet.ParentConfig{Tier0Retention: 2 * time.Minute, FutureSlack: 1e6 * time.Hour})
	defer parent.Close()
	a, c := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		parent.ServeStream(context.Background(), "k", &messages.StreamHello{Hostname: "h", GUID: "g", NodeID: "n"}, pipeStream{a})
	}()
	var rep messages.AgentReply
	if err := messages.ReadFrame(c, &rep, messages.AgentMaxFrame); err != nil {
		b.Fatal(err)
	}
	first := &messages.StreamBatch{}
	for ch := 0; ch < chartsPerChild; ch++ {
		def := chartDef(ch)
		sc := messages.StreamChart{ID: def.ID, Units: "x"}
		for _, d := range def.Dims {
			sc.Dims = append(sc.Dims, d.ID)
		}
		first.Charts = append(first.Charts, sc)
	}
	row := make([]float64, dimsPerChart)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bt := &messages.StreamBatch{Seq: uint64(i + 1)}
		if i == 0 {
			bt.Charts = first.Charts
		}
		for ch := 0; ch < chartsPerChild; ch++ {
			for d := range row {
				row[d] = float64(i%1000) + float64(d)*0.5
			}
			bt.Points = append(bt.Points, messages.StreamPoints{Chart: fmt.Sprintf("app.c%d", ch), Start: int64(1_700_000_000 + i), Values: [][]float64{row}})
		}
		if err := messages.WriteFrame(c, bt, messages.AgentMaxFrame); err != nil {
			b.Fatal(err)
		}
		var ack messages.StreamAck
		if err := messages.ReadFrame(c, &ack, messages.AgentMaxFrame); err != nil || ack.Error != "" {
			b.Fatalf("ack: %v %s", err, ack.Error)
		}
	}
	b.StopTimer()
	c.Close()
	<-done
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*children/1e9*100, "cpu-%-for-100-children")
}

// BenchmarkRemoteWriteEncode: protobuf + snappy of remote-write requests
// of 5,000 samples, in samples per second of one core.
func BenchmarkRemoteWriteEncode(b *testing.B) {
	series := make([]remotewrite.Series, 500)
	for i := range series {
		l := func(n, v string) remotewrite.Label { return remotewrite.Label{Name: n, Value: v} }
		series[i].Labels = []remotewrite.Label{l("__name__", "netdata_app_c_x_average"), l("chart", "app.c1"), l("dimension", fmt.Sprintf("d%d", i)), l("family", ""), l("instance", "child-001")}
		for k := 0; k < 10; k++ {
			series[i].Samples = append(series[i].Samples, remotewrite.Sample{Value: float64(i * k), Timestamp: int64(1_700_000_000_000 + k*1000)})
		}
	}
	var raw, enc []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		raw = remotewrite.AppendWriteRequest(raw[:0], series)
		enc = snappyEncode(enc, raw)
	}
	b.ReportMetric(float64(5000*b.N)/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(float64(len(enc))/5000, "bytes/sample")
}

// BenchmarkRemoteWritePrometheus: 10,000 dimensions, one minute of
// points (600,000 samples) sent to a real Prometheus's remote-write
// receiver, in samples per second end to end (encode, snappy, HTTP,
// Prometheus' own ingestion).
func BenchmarkRemoteWritePrometheus(b *testing.B) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		b.Skip("prometheus not installed (apt-get install prometheus)")
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	dir := b.TempDir()
	cfg := filepath.Join(dir, "p.yml")
	_ = os.WriteFile(cfg, []byte("global:\n  scrape_interval: 1m\n"), 0o600)
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "d"),
		"--web.listen-address="+addr, "--web.enable-remote-write-receiver", "--log.level=error")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if r, err := http.Get("http://" + addr + "/-/ready"); err == nil && r.StatusCode == 200 {
			r.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("prometheus not ready")
		}
		time.Sleep(50 * time.Millisecond) // waiting for an external process to listen
	}
	const charts, dims, seconds = 100, 100, 60
	for i := 0; i < b.N; i++ {
		db, _ := store.Open(store.Config{})
		for c := 0; c < charts; c++ {
			def := &store.ChartDef{ID: fmt.Sprintf("app.c%d", c), Units: "x"}
			for d := 0; d < dims; d++ {
				def.Dims = append(def.Dims, store.DimDef{ID: fmt.Sprintf("d%d", d)})
			}
			_ = db.Register(def)
		}
		row := make([]float64, dims)
		t0 := time.Now().Unix() - 2*seconds
		put := func(ts int64) {
			for c := 0; c < charts; c++ {
				for d := range row {
					row[d] = float64(ts%97 + int64(d))
				}
				_ = db.Append(fmt.Sprintf("app.c%d", c), ts, row)
			}
		}
		put(t0)
		w, _ := remotewrite.New(remotewrite.Config{
			URL: "http://" + addr + "/api/v1/write", Sources: func() []remotewrite.Source {
				return []remotewrite.Source{{Instance: fmt.Sprintf("bench-%d", i), DB: db}}
			},
		})
		w.Collect() // cursors start at t0
		for ts := t0 + 1; ts <= t0+seconds; ts++ {
			put(ts)
		}
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		go w.Send(ctx)
		w.Collect()
		want := int64(charts * dims * seconds)
		for w.Sent.Load()+w.Dropped.Load()+w.Failed.Load() < want {
			time.Sleep(2 * time.Millisecond) // polling the sender's counter
		}
		el := time.Since(start)
		cancel()
		db.Close()
		if w.Dropped.Load()+w.Failed.Load() > 0 {
			b.Fatalf("dropped %d failed %d", w.Dropped.Load(), w.Failed.Load())
		}
		b.ReportMetric(float64(want)/el.Seconds(), "samples/s")
	}
}
