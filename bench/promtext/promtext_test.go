package promtext

import (
	"net"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Get reads counters and gauges from a real Prometheus exposition (the
// client library's handler on a loopback port); a name not exposed is
// absent; text that does not parse is an error.
func TestGet(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "x"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "y", Help: "y"})
	reg.MustRegister(c, g)
	c.Add(7)
	g.Set(2.5)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	v, err := Get(http.DefaultClient, ln.Addr().String(), "x_total", "y", "absent")
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 2 || v["x_total"] != 7 || v["y"] != 2.5 {
		t.Fatalf("values %v", v)
	}
	if _, err := Values("x_total{ 7\n", "x_total"); err == nil {
		t.Fatal("malformed text read without an error")
	}
	if v, err := Values("# TYPE z untyped\nz 3\n", "z"); err != nil || v["z"] != 3 {
		t.Fatalf("untyped: %v, %v", v, err)
	}
}
