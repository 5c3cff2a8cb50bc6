package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkH2Small: 100 B answers of an HTTP/1.1 upstream through the
// edge's HTTP/2, ten streams in flight on one connection. Its
// allocations per request (-benchmem) count the client's too.
func BenchmarkH2Small(b *testing.B) {
	body := strings.Repeat("x", 100)
	up := serveUpstream(b, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, body)
	})
	e := newTestH2Edge(b, map[string]string{"bench.p2p": up}, Deps{})
	_, httpsAddr := e.s.Addrs()
	url := "https://bench.p2p:" + strings.Split(httpsAddr.String(), ":")[1] + "/small"
	get := func() error {
		resp, err := e.c.Get(url)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return err
	}
	if err := get(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(5) // ten streams on two Ps
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := get(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
