package node

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"
)

// BenchmarkDoHEdge measures DoH POST queries through the edge proxy
// (HTTPS, HTTP/1.1 keep-alive, one connection per parallel client) for a
// local record: the whole path a browser's secure DNS takes. Reports
// queries/s.
func BenchmarkDoHEdge(b *testing.B) {
	n, err := Start(testConfig(b.TempDir()), io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(n.Stop)
	base := "http://" + n.AdminAddr()
	mustJSON(b, "POST", base+"/api/add-local-dns", `{"name":"nas.lan","type":"A","ttl":60,"data":"192.168.1.20"}`, 200, nil)
	_, httpsAddr := n.EdgeAddrs()
	c := edgeClient(httpsAddr, n.CA().Pool())
	tr := c.Transport.(*http.Transport)
	tr.MaxIdleConnsPerHost = 64
	tr.TLSClientConfig = &tls.Config{RootCAs: n.CA().Pool()}
	q := dohQuery(b, "nas.lan", 1)
	do := func() error {
		req, _ := http.NewRequest("POST", "https://admin.p2p/dns-query", bytes.NewReader(q))
		req.Header.Set("Content-Type", "application/dns-message")
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	if err := do(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.SetParallelism(8) // 16 clients on 2 CPUs: keep the server busy while clients wait
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := do(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "queries/s")
}
