package h2srv

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

var body100 = bytes.Repeat([]byte{'a'}, 100)

// answer100 is the benchmarks' handler: a 100-byte answer.
var answer100 = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(body100)
})

// BenchmarkH2 measures requests over one TLS connection with 10 streams
// in flight, from a raw Framer client (few costs of its own), through
// this server and through net/http's HTTP/2 server with the same
// handler. cpu-ns/req is the process's CPU time (client included) per
// request.
func BenchmarkH2(b *testing.B) {
	b.Run("h2srv", func(b *testing.B) {
		ts := newTestServer(b, Config{}, answer100)
		benchH2(b, ts.addr)
		b.ReportMetric(float64(ts.srv.writes.Load())/float64(b.N), "writes/req")
	})
	b.Run("net-http", func(b *testing.B) {
		benchH2(b, newNetHTTPServer(b, answer100))
	})
}

// newNetHTTPServer serves h with net/http's HTTP/2 server only, on TLS.
func newNetHTTPServer(b testing.TB, h http.Handler) string {
	cert, _ := testCert()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var p http.Protocols
	p.SetHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &p, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	b.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchH2(b *testing.B, addr string) {
	const inFlight = 10
	nc, err := tls.Dial("tcp", addr, clientTLS())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	bw := bufio.NewWriterSize(nc, 32<<10)
	br := bufio.NewReaderSize(nc, 64<<10)
	fr := http2.NewFramer(bw, br)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	_, _ = bw.WriteString(clientPreface)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	_ = fr.WriteWindowUpdate(0, 1<<30)
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	id := uint32(1)
	send := func() {
		hbuf.Reset()
		for _, f := range [...][2]string{{":method", "GET"}, {":scheme", "https"}, {":path", "/bench"}, {":authority", "localhost"}, {"user-agent", "bench"}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndStream: true, EndHeaders: true})
		id += 2
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	sent, done, consumed := 0, 0, 0
	for ; sent < min(inFlight, b.N); sent++ {
		send()
	}
	_ = bw.Flush()
	for done < b.N {
		f, err := fr.ReadFrame()
		if err != nil {
			b.Fatal(err)
		}
		ended := false
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			ended = f.StreamEnded()
		case *http2.DataFrame:
			ended = f.StreamEnded()
			consumed += int(f.Length)
		case *http2.RSTStreamFrame:
			b.Fatalf("stream reset: %v", f.ErrCode)
		case *http2.GoAwayFrame:
			b.Fatalf("GOAWAY: %v", f.ErrCode)
		}
		if !ended {
			continue
		}
		done++
		if consumed > 1<<20 {
			_ = fr.WriteWindowUpdate(0, uint32(consumed))
			consumed = 0
		}
		if sent < b.N {
			send()
			sent++
		}
		if br.Buffered() == 0 {
			_ = bw.Flush()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/req")
}
