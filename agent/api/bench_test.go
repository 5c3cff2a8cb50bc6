package api

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/valyala/fasthttp"

	"peerdns/agent/logs"
	"peerdns/agent/store"
)

// benchHandle runs the handler for uri b.N times on one reused RequestCtx
// (no network: this measures the API's own cost per request).
func benchHandle(b *testing.B, uri string) {
	env := newTestEnv(b)
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetMethod("GET")
	env.srv.Handle(&ctx)
	if ctx.Response.StatusCode() != 200 {
		b.Fatalf("%s: %d %s", uri, ctx.Response.StatusCode(), ctx.Response.Body())
	}
	b.SetBytes(int64(len(ctx.Response.Body())))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctx.Response.Reset()
		env.srv.Handle(&ctx)
	}
}

// The data benchmarks repeat one URI, so after the first request they
// measure the per-second answer cache; BenchmarkDataUncached and
// agent/query's BenchmarkQuery measure the query itself.
func BenchmarkDataSystemCPU(b *testing.B) {
	benchHandle(b, "/api/v1/data?chart=system.cpu&after=-60&points=10")
}

func BenchmarkDataSystemCPUDefaults(b *testing.B) {
	benchHandle(b, "/api/v1/data?chart=system.cpu")
}

func BenchmarkDataJSONWrap600(b *testing.B) {
	benchHandle(b, "/api/v1/data?chart=system.cpu&after=-600&points=60&options=jsonwrap")
}

func BenchmarkDataUncached(b *testing.B) {
	env := newTestEnv(b)
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("GET")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		// A new URI each time defeats the cache (points differ).
		ctx.Request.SetRequestURI("/api/v1/data?chart=system.cpu&after=-60&points=" + strconv.Itoa(30+i%30))
		ctx.Response.Reset()
		env.srv.Handle(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatal(ctx.Response.StatusCode())
		}
		env.srv.dataCache.mu.Lock()
		env.srv.dataCache.m = nil
		env.srv.dataCache.mu.Unlock()
	}
}

func BenchmarkPrometheus(b *testing.B) {
	benchHandle(b, "/api/v1/allmetrics?format=prometheus")
}

// BenchmarkAllmetricsJSON measures allmetrics?format=json, the
// hand-written encoder (appendAllJSON) that scripts poll and export
// reuses.
func BenchmarkAllmetricsJSON(b *testing.B) {
	benchHandle(b, "/api/v1/allmetrics?format=json")
}

func BenchmarkInfo(b *testing.B) {
	benchHandle(b, "/api/v1/info")
}

// BenchmarkPrometheus1300 renders a scrape at Netdata's scale on this
// host: 330 more charts of 4 dimensions (1,300+ series in all).
func BenchmarkPrometheus1300(b *testing.B) {
	env := newTestEnv(b)
	ts := env.now.Unix() - 1
	for i := 0; i < 330; i++ {
		id := "bench.chart" + strconv.Itoa(i)
		c := &store.ChartDef{ID: id, Context: "bench.ctx" + strconv.Itoa(i%40), Family: "bench", Units: "events/s",
			Priority: 5000 + i, UpdateEvery: 1, Dims: dimsOf("a", "b", "c", "d")}
		if err := env.db.Register(c); err != nil {
			b.Fatal(err)
		}
		if err := env.db.Append(id, ts, []float64{1.5, 2.25, float64(i), -3}); err != nil {
			b.Fatal(err)
		}
	}
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/api/v1/allmetrics?format=prometheus")
	ctx.Request.Header.SetMethod("GET")
	env.srv.Handle(&ctx)
	if n := bytes.Count(ctx.Response.Body(), []byte("\n")); n < 1300 {
		b.Fatalf("only %d series", n)
	}
	b.SetBytes(int64(len(ctx.Response.Body())))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctx.Response.Reset()
		env.srv.Handle(&ctx)
	}
}

// BenchmarkProcesses is a processes request served from the sampler's
// scan (the second-long reuse); BenchmarkScan in agent/procs is the scan.
func BenchmarkProcesses(b *testing.B) {
	benchHandle(b, "/api/v3/processes?sort=cpu&limit=50")
}

// BenchmarkLogsAudit is one 200-entry page of a full (10,000-entry) audit
// trail, JSON encoding included.
func BenchmarkLogsAudit(b *testing.B) {
	a, err := logs.OpenAudit("", 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < logs.DefaultAuditCapacity; i++ {
		_ = a.Record(logs.Entry{Priority: logs.PriNotice, Unit: "settings", Message: "setting " + strconv.Itoa(i) + " changed"})
	}
	env := newTestEnv(b, func(o *Options) { o.Audit = a })
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/api/v3/logs?source=audit")
	ctx.Request.Header.SetMethod("GET")
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		env.srv.Handle(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatal(ctx.Response.StatusCode())
		}
	}
	b.SetBytes(int64(len(ctx.Response.Body())))
}
