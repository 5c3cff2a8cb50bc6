package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pacedBody gives n bytes in pieces of piece, one every gap: a client
// whose upload keeps flowing, slowly.
type pacedBody struct {
	left, piece int
	gap         time.Duration
}

func (b *pacedBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.gap) // the client's pace, not a wait for an event
	n := min(len(p), b.piece, b.left)
	clear(p[:n])
	b.left -= n
	return n, nil
}

// pacedUpload is a body of pacedLength bytes that takes one and a half
// timeouts to come: a piece every eighth of timeout.
func pacedUpload(timeout time.Duration) io.Reader {
	return &pacedBody{left: pacedLength, piece: pacedLength / 12, gap: timeout / 8}
}

const pacedLength = 48 << 10

// TestEdgeLongUploadOutlivesUpstreamTimeout: an upload to an HTTP/1.1
// upstream that keeps flowing for longer than UpstreamTimeout is not
// cut, over HTTP/2, HTTP/3 and HTTP/1.1, and the answer that follows it
// has UpstreamTimeout from the upload's end to begin; so has a request on
// a connection the pool kept idle for a while. UpstreamTimeout is between
// two operations (timeouts.go): the wait for the answer counts from the
// request's last write, not from when net/http's read loop (the way
// HTTP/2 and HTTP/3 uploads go upstream) began to wait on the connection.
func TestEdgeLongUploadOutlivesUpstreamTimeout(t *testing.T) {
	// Each wait below is a fraction of the timeout that leaves the
	// race detector on a loaded machine half a second to spare.
	const timeout = 2 * time.Second
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if d, _ := time.ParseDuration(r.URL.Query().Get("think")); d > 0 {
			time.Sleep(d) // the upstream's own work, not a wait for an event
		}
		io.WriteString(w, strconv.FormatInt(n, 10))
	})
	e := startTestEdge(t, map[string]string{"up.p2p": up}, Deps{UpstreamTimeout: timeout})

	big := bytes.Repeat([]byte{'x'}, SmallBody+1) // too long for the HTTP/1.1 pool: net/http's transport
	post := func(what, think string, body io.Reader, n, want int64) {
		t.Helper()
		resp, got := e.do(t, http.MethodPost, "https://up.p2p/upload?think="+think, body, n)
		if resp.StatusCode != http.StatusOK || got != strconv.FormatInt(want, 10) {
			t.Fatalf("%s: %d %q, want 200 %d", what, resp.StatusCode, got, want)
		}
	}
	post("a first upload", "0s", bytes.NewReader(big), int64(len(big)), int64(len(big)))
	// The same connection again (the pool keeps it for half the
	// timeout), after an idle spell that, with the answer's wait, goes
	// past the timeout counted from when the connection went idle.
	time.Sleep(timeout * 2 / 5) // the idle spell is what is tried
	post("an upload after an idle spell", (timeout * 3 / 4).String(), bytes.NewReader(big), int64(len(big)), int64(len(big)))
	// Longer than the timeout; then the upstream thinks for a quarter of
	// it before it answers.
	think := (timeout / 4).String()
	post("an upload longer than the timeout", think, pacedUpload(timeout), -1, pacedLength)

	// HTTP/3 uploads take the same way upstream.
	h3 := &http.Client{Timeout: 10 * time.Second, Transport: e.h3(t, "up.p2p")}
	req, err := http.NewRequest(http.MethodPost, "https://up.p2p/upload?think="+think, pacedUpload(timeout))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h3.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || string(got) != strconv.Itoa(pacedLength) {
		t.Fatalf("an HTTP/3 upload longer than the timeout: %d %q %v, want 200 %d", resp.StatusCode, got, err, pacedLength)
	}

	// And HTTP/1.1 uploads, which the edge streams itself (upload.go).
	httpAddr, _ := e.s.Addrs()
	req, err = http.NewRequest(http.MethodPost, "http://"+httpAddr.String()+"/upload?think="+think, pacedUpload(timeout))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "up.p2p"
	resp, err = (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err = io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || string(got) != strconv.Itoa(pacedLength) {
		t.Fatalf("an HTTP/1.1 upload longer than the timeout: %d %q %v, want 200 %d", resp.StatusCode, got, err, pacedLength)
	}
}

// TestEdgeTLSUpstreamTimeouts: to an upstream in TLS (ssl: true), that
// speaks HTTP/1.1 or picks h2, the HTTP/2 path's uploads keep the same
// timeouts: one longer than UpstreamTimeout that keeps flowing passes,
// and an upstream that stalls after its answer's head has its client's
// stream ended after UpstreamTimeout, not held until the client gives
// up; a client that reads slowly is not taken for a quiet upstream.
func TestEdgeTLSUpstreamTimeouts(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "http/1.1", true: "h2"}[h2], func(t *testing.T) { tlsUpstreamTimeouts(t, h2) })
	}
}

func tlsUpstreamTimeouts(t *testing.T, h2 bool) {
	const timeout = time.Second
	// bigAnswer is more than the flow-control windows and buffers
	// between the upstream and the client hold.
	const bigAnswer = 24 << 20
	piece := bytes.Repeat([]byte{'b'}, 64<<10)
	release := make(chan struct{})
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/big" {
			// Its head at once and its body a piece at a time, as a
			// server streams what it makes: made whole first, the body
			// took longer than the timeout under the race detector on a
			// loaded machine, and the edge rightly answered 504.
			w.Header().Set("Content-Length", strconv.Itoa(bigAnswer))
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for sent := 0; sent < bigAnswer; sent += len(piece) {
				if _, err := w.Write(piece); err != nil {
					return
				}
			}
			return
		}
		if r.URL.Path != "/stall" {
			io.WriteString(w, strconv.FormatInt(n, 10)+" "+r.Proto)
			return
		}
		w.Header().Set("Content-Length", "1000")
		_, _ = w.Write([]byte("0123456789"))
		w.(http.Flusher).Flush()
		<-release
	}))
	ts.EnableHTTP2 = h2
	ts.StartTLS()
	t.Cleanup(func() { close(release); ts.Close() })
	e := newTestH2Edge(t, map[string]string{"s.p2p": strings.TrimPrefix(ts.URL, "https://")}, Deps{UpstreamTimeout: timeout})
	e.s.d.View.Load().Domains["s.p2p"].SSL = true // before its first request

	proto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2]
	resp, got := e.do(t, http.MethodPost, "https://s.p2p/upload", pacedUpload(timeout), -1)
	if want := strconv.Itoa(pacedLength) + " " + proto; resp.StatusCode != http.StatusOK || got != want {
		t.Fatalf("an upload longer than the timeout: %d %q, want 200 %q", resp.StatusCode, got, want)
	}

	// A client that reads a big answer slowly, pausing for longer than
	// UpstreamTimeout: the upstream is not what is quiet, nothing is cut.
	big := bytes.Repeat([]byte{'x'}, SmallBody+1)
	resp, err := e.c.Post("https://s.p2p/big", "application/octet-stream", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for range 2 {
		m, err := io.CopyN(io.Discard, resp.Body, 64<<10)
		n += m
		if err != nil {
			t.Fatalf("a big answer read slowly: %d, %v after %d bytes", resp.StatusCode, err, n)
		}
		time.Sleep(timeout * 3 / 2) // the client's pace is what is tried
	}
	m, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n += m; err != nil || n != bigAnswer {
		t.Fatalf("a big answer read slowly: %d bytes, %v; want %d", n, err, bigAnswer)
	}

	req, err := http.NewRequest(http.MethodPost, "https://s.p2p/stall", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if resp, err := e.c.Do(req); err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatalf("a stalled answer: %d, read whole", resp.StatusCode)
		}
	} else if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a stalled answer: %v after %v, want its stream ended by the edge", err, time.Since(start))
	}
}
