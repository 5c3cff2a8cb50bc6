package h2srv

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"peerdns/internal/testutil"
)

// FuzzServeConn feeds arbitrary bytes after the client preface to
// ServeConn over net.Pipe: the server must never panic, and both
// ServeConn and every handler must return once the client hangs up.
// The seeds are well-formed
// exchanges: requests with bodies and trailers, settings, pings,
// window updates, resets, priorities, CONTINUATION (fuzzSeeds builds
// them; testdata/fuzz/FuzzServeConn holds the same as files).
func FuzzServeConn(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var handlers atomic.Int32
		srv := New(Config{MaxConcurrentStreams: 4, MaxHeaderListSize: 4 << 10, StreamWindow: 1 << 16, ConnWindow: 1 << 16})
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handlers.Add(1)
			defer handlers.Add(-1)
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("Trailer", "X-T")
			_, _ = w.Write(b)
			_, _ = io.WriteString(w, r.URL.Path)
			w.Header().Set("X-T", "t")
		})
		cc, sc := net.Pipe()
		served := make(chan struct{})
		go func() {
			defer close(served)
			_ = srv.ServeConn(context.Background(), sc, h)
		}()
		go func() { _, _ = io.Copy(io.Discard, cc) }()
		go func() {
			_, _ = cc.Write([]byte(clientPreface))
			_, _ = cc.Write(data)
			_ = cc.Close()
		}()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			_ = cc.Close()
			t.Fatal("ServeConn still running 10 s after the client hung up")
		}
		testutil.Eventually(t, 10*time.Second, testutil.Zero(handlers.Load, "handlers running after the connection ended"))
		_ = srv.Close()
	})
}

// fuzzSeeds are well-formed client frame sequences (after the preface).
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	build := func(fn func(fr *http2.Framer, block func(path string, extra ...string) []byte)) {
		var buf, hbuf bytes.Buffer
		fr := http2.NewFramer(&buf, nil)
		enc := hpack.NewEncoder(&hbuf)
		block := func(path string, extra ...string) []byte {
			hbuf.Reset()
			var fields []string
			if path != "" { // else a trailer block
				fields = []string{":method", "POST", ":scheme", "https", ":path", path, ":authority", "fuzz"}
			}
			fields = append(fields, extra...)
			for i := 0; i+1 < len(fields); i += 2 {
				_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
			}
			return bytes.Clone(hbuf.Bytes())
		}
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
		fn(fr, block)
		seeds = append(seeds, buf.Bytes())
	}
	build(func(fr *http2.Framer, block func(string, ...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block("/get"), EndStream: true, EndHeaders: true})
	})
	build(func(fr *http2.Framer, block func(string, ...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block("/post", "content-length", "5", "trailer", "x-r"), EndHeaders: true})
		_ = fr.WriteData(1, false, []byte("hel"))
		_ = fr.WriteDataPadded(1, false, []byte("lo"), make([]byte, 7))
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block("", "x-r", "v"), EndStream: true, EndHeaders: true})
		_ = fr.WriteWindowUpdate(0, 1000)
		_ = fr.WritePing(false, [8]byte{1})
	})
	build(func(fr *http2.Framer, block func(string, ...string) []byte) {
		b := block("/cont", "x-a", "aaaaaaaaaaaaaaaaaaaaaaaaaaa")
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: b[:5]})
		_ = fr.WriteContinuation(3, false, b[5:10])
		_ = fr.WriteContinuation(3, true, b[10:])
		_ = fr.WritePriority(5, http2.PriorityParam{StreamDep: 3, Weight: 7})
		_ = fr.WriteRSTStream(3, http2.ErrCodeCancel)
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: block("/after"), EndStream: true, EndHeaders: true})
		_ = fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	})
	build(func(fr *http2.Framer, block func(string, ...string) []byte) {
		for id := uint32(1); id < 20; id += 2 {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block("/many"), EndHeaders: true})
			_ = fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 14}, http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
		_ = fr.WriteSettingsAck()
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 21, BlockFragment: block("/held"), EndStream: true, EndHeaders: true})
		_ = fr.WriteWindowUpdate(21, 3)
	})
	return seeds
}
