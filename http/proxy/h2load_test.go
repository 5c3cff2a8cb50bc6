package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"peerdns/internal/testutil"
)

// BenchmarkH2Load: 100 B and 64 KiB answers through the edge's HTTP/2 as
// bench/proxy/h2.sh asks for them (h2load -c8 -m10): eight connections,
// ten streams in flight on each, a new request sent as soon as an answer
// ends, the requests' frames written in one piece per batch of answers
// read. The client speaks HTTP/2 frames itself from precomputed header
// blocks and the upstream answers with a canned nginx-like head, so
// most of the process's time is the edge's own (profiles: -cpuprofile).
// Reported beside ns/op: the process's CPU time and write system calls
// per request (client and upstream included), goroutines started per
// request. The client's share is not small: it decrypts every TLS
// record the edge sends, so a change in records per response moves the
// process's CPU here far more than the edge's own (bench/README.md,
// "edge HTTP/2": gathering above TLS read 13% less here, no less node
// CPU under h2load).
func BenchmarkH2Load(b *testing.B) {
	b.Run("100B", func(b *testing.B) { benchH2Load(b, 100) })
	b.Run("64KiB", func(b *testing.B) { benchH2Load(b, 64<<10) })
}

func benchH2Load(b *testing.B, size int) {
	up := cannedUpstream(b, size)
	e := newTestH2Edge(b, map[string]string{"bench.p2p": up}, Deps{})
	_, httpsAddr := e.s.Addrs()
	// One request first, so the pool and the certificates are warm.
	resp, err := e.c.Get("https://bench.p2p:" + strconv.Itoa(httpsAddr.(*net.TCPAddr).Port) + "/small")
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	const conns, streams = 8, 10
	var left atomic.Int64
	left.Store(int64(b.N))
	cs := make([]*rawH2, conns)
	for i := range cs {
		c, err := dialRawH2(httpsAddr.String(), e.rootTLS())
		if err != nil {
			b.Fatal(err)
		}
		cs[i] = c
	}
	created := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(created)
	g0 := created[0].Value.Uint64()
	cpu0, w0 := processCPU(), writeCalls()
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			if err := c.run(&left, streams); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(writeCalls()-w0)/float64(b.N), "writes/op")
	metrics.Read(created)
	b.ReportMetric(float64(created[0].Value.Uint64()-g0)/float64(b.N), "goroutines/op")
	for _, c := range cs {
		c.conn.Close()
	}
}

// processCPU is the CPU time this process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeCalls is the write system calls this process has made so far
// (syscw of /proc/self/io: the edge's, the client's and the upstream's).
func writeCalls() int64 {
	b, _ := os.ReadFile("/proc/self/io")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "syscw: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// rootTLS is a client TLS config that trusts the edge's CA, for bench.p2p
// in h2.
func (e *h2Edge) rootTLS() *tls.Config {
	return &tls.Config{RootCAs: e.s.d.CA.Pool(), ServerName: "bench.p2p", NextProtos: []string{"h2"}}
}

// rawH2 is one client connection of BenchmarkH2Load.
type rawH2 struct {
	conn  *tls.Conn
	br    *bufio.Reader
	bw    *bufio.Writer
	fr    *http2.Framer
	block []byte
	next  uint32
}

func dialRawH2(addr string, conf *tls.Config) (*rawH2, error) {
	conn, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		return nil, err
	}
	c := &rawH2{conn: conn, br: bufio.NewReaderSize(conn, 16<<10), bw: bufio.NewWriterSize(conn, 16<<10), next: 1}
	c.fr = http2.NewFramer(c.bw, c.br)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	enc.SetMaxDynamicTableSizeLimit(0)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "bench.p2p"},
		{":path", "/small"}, {"user-agent", "h2load nghttp2/1.52.0"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	c.block = hb.Bytes()
	if _, err := c.bw.WriteString(http2.ClientPreface); err != nil {
		return nil, err
	}
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<30 - 1}); err != nil {
		return nil, err
	}
	if err := c.fr.WriteWindowUpdate(0, 1<<30-1-65535); err != nil {
		return nil, err
	}
	return c, c.bw.Flush()
}

// run keeps streams requests in flight until left runs out, then waits
// for the last answers.
func (c *rawH2) run(left *atomic.Int64, streams int) error {
	inflight := 0
	send := func() error {
		if left.Add(-1) < 0 {
			return nil
		}
		inflight++
		id := c.next
		c.next += 2
		return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.block, EndStream: true, EndHeaders: true})
	}
	for range streams {
		if err := send(); err != nil {
			return err
		}
	}
	if err := c.bw.Flush(); err != nil {
		return err
	}
	got := 0
	for inflight > 0 {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			got += len(f.Data())
			if f.StreamEnded() {
				inflight--
				if err := send(); err != nil {
					return err
				}
			}
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				inflight--
				if err := send(); err != nil {
					return err
				}
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := c.fr.WriteSettingsAck(); err != nil {
					return err
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				if err := c.fr.WritePing(true, f.Data); err != nil {
					return err
				}
			}
		case *http2.RSTStreamFrame:
			return io.ErrUnexpectedEOF
		case *http2.GoAwayFrame:
			return io.ErrUnexpectedEOF
		}
		if got > 64<<20 {
			if err := c.fr.WriteWindowUpdate(0, uint32(got)); err != nil {
				return err
			}
			got = 0
		}
		if c.br.Buffered() == 0 && c.bw.Buffered() > 0 {
			if err := c.bw.Flush(); err != nil {
				return err
			}
		}
	}
	return c.bw.Flush()
}

// cannedUpstream answers every HTTP/1.1 request it reads with size bytes
// under a head like nginx's, on keep-alive connections.
func cannedUpstream(t testing.TB, size int) string {
	answer := []byte("HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 29 Nov 2026 10:00:00 GMT\r\n" +
		"Content-Type: application/octet-stream\r\nContent-Length: " + strconv.Itoa(size) + "\r\nLast-Modified: Sun, 29 Nov 2026 09:00:00 GMT\r\n" +
		"Connection: keep-alive\r\nETag: \"692ab9e0-64\"\r\nAccept-Ranges: bytes\r\n\r\n" + strings.Repeat("x", size))
	return testutil.ServeTCP(t, func(c net.Conn) {
		buf := make([]byte, 16<<10)
		have := 0
		out := make([]byte, 0, 4<<10)
		for {
			n, err := c.Read(buf[have:])
			if err != nil {
				return
			}
			have += n
			out = out[:0]
			for {
				i := bytes.Index(buf[:have], []byte("\r\n\r\n"))
				if i < 0 {
					break
				}
				out = append(out, answer...)
				have = copy(buf, buf[i+4:have])
			}
			if len(out) > 0 {
				if _, err := c.Write(out); err != nil {
					return
				}
			}
		}
	}).String()
}
