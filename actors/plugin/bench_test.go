package plugin

import (
	"context"
	"testing"
)

// BenchmarkPluginHandle is one handle call round trip to a real handler
// process over its pipes (JSON-RPC, base64 bodies), with the db.put and
// db.get round trips the fake plugin makes inside each handle; run with
// -cpu to see it under parallel callers.
func BenchmarkPluginHandle(b *testing.B) {
	dir := b.TempDir()
	writePlugin(b, dir, "bench", "bench.p2p", "ok", nil)
	h := newHarness(b, dir, nil)
	rt := h.waitRunning("bench.p2p")
	req := &HandleRequest{Method: "GET", Path: "/bench", Headers: map[string]string{"Accept": "*/*"}, Body: make([]byte, 100)}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := rt.Handle(context.Background(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
