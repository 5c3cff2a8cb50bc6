package api

import (
	"strconv"
	"testing"

	"github.com/valyala/fasthttp"

	"peerdns/agent/store"
)

// benchUncached runs uri (the answer cache emptied after each query) and reports time and bytes allocated per query.
func benchUncached(b *testing.B, env *testEnv, uri string) {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("GET")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ctx.Request.SetRequestURI(uri)
		ctx.Response.Reset()
		env.srv.Handle(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("%d %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
		if i == 0 {
			b.SetBytes(int64(len(ctx.Response.Body())))
		}
		env.srv.dataCache.mu.Lock()
		env.srv.dataCache.m = nil
		env.srv.dataCache.mu.Unlock()
	}
}

// The v1 query of a chart and the json2 queries of its context, uncached,
// on the test store (cpu.cpu: two instances of two dimensions).
func BenchmarkV1DataContext(b *testing.B) {
	benchUncached(b, newTestEnv(b), "/api/v1/data?context=cpu.cpu&after=-60")
}

func BenchmarkJSON2ByDimension(b *testing.B) {
	benchUncached(b, newTestEnv(b), "/api/v3/data?contexts=cpu.cpu&after=-60&group_by=dimension")
}

func BenchmarkJSON2ByLabel(b *testing.B) {
	benchUncached(b, newTestEnv(b), "/api/v3/data?contexts=cpu.cpu&after=-60&group_by=label&group_by_label=_collect_module")
}

// BenchmarkJSON2Contexts100 is the memory per query at 100 contexts: 100
// contexts of 4 instances of 5 dimensions (2,000 metrics), 600 s stored,
// one json2 query over all of them grouped by context (B/op is the
// memory one query allocates).
func BenchmarkJSON2Contexts100(b *testing.B) {
	env := newTestEnv(b)
	now := env.now.Unix()
	for c := 0; c < 100; c++ {
		for i := 0; i < 4; i++ {
			def := &store.ChartDef{ID: "bench" + strconv.Itoa(c) + ".i" + strconv.Itoa(i), Type: "bench",
				Context: "bench.c" + strconv.Itoa(c), Family: "bench", Title: "bench", Units: "u", ChartType: "line",
				Plugin: "bench.plugin", Module: "m" + strconv.Itoa(i%2), Priority: 5000 + c, UpdateEvery: 1,
				Dims: dimsOf("a", "b", "c", "d", "e")}
			def.Name = def.ID
			if err := env.db.Register(def); err != nil {
				b.Fatal(err)
			}
			for ts := now - 600; ts < now; ts++ {
				if err := env.db.Append(def.ID, ts, []float64{1, 2, 3, 4, float64(ts % 10)}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	benchUncached(b, env, "/api/v3/data?contexts=bench.*&after=-600&group_by=context")
}
