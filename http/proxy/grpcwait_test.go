package proxy

import (
	"bufio"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"
)

func TestGRPCTimeoutParse(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"10S": 10 * time.Second, "1H": time.Hour, "2M": 2 * time.Minute, "5m": 5 * time.Millisecond,
		"7u": 7 * time.Microsecond, "100n": 100, "99999999S": 99999999 * time.Second, "99999999H": 1<<63 - 1,
	} {
		if got, ok := grpcTimeout(v); !ok || got != want {
			t.Errorf("grpcTimeout(%q) = %v %v, want %v", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "S", "10", "10s", "123456789S", "-1S", "+1S", "1.5S", " 1S", "1 S"} {
		if got, ok := grpcTimeout(v); ok {
			t.Errorf("grpcTimeout(%q) = %v, want refused", v, got)
		}
	}
}

// A gRPC call's answer head is waited for as long as its grpc-timeout
// says when that is longer than UpstreamTimeout, and UpstreamTimeout
// otherwise (then DEADLINE_EXCEEDED, saying so); the wait starts when
// the request has been sent whole, so a client stream longer than the
// wait is answered at its end, and a bidirectional stream whose head
// came first is never cut by it.
func TestEdgeGRPCWaitsItsDeadline(t *testing.T) {
	const slow = 3 * quietTimeout
	up := serveUpstream(t, true, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/svc.S/Unary":
			time.Sleep(slow)
		case "/svc.S/ClientStream":
			_, _ = io.Copy(io.Discard, r.Body) // the answer comes at the stream's end
		case "/svc.S/Bidi":
			w.Header().Set("Content-Type", "application/grpc")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			br := bufio.NewReader(r.Body)
			for {
				msg := make([]byte, 6)
				if _, err := io.ReadFull(br, msg); err != nil {
					break
				}
				_, _ = w.Write(msg)
				w.(http.Flusher).Flush()
			}
			time.Sleep(slow) // its request ended, the answer goes on
		}
		w.Header().Set("Content-Type", "application/grpc")
		_, _ = w.Write([]byte{0, 0, 0, 0, 1, 'z'})
		w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
	})
	e := newTestH2Edge(t, map[string]string{"w.p2p": up}, Deps{UpstreamTimeout: quietTimeout})
	call := func(path, timeout string, body io.Reader) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "https://w.p2p"+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		if timeout != "" {
			req.Header.Set("Grpc-Timeout", timeout)
		}
		resp, err := e.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp, b
	}
	status := func(resp *http.Response) string {
		if s := resp.Header.Get("Grpc-Status"); s != "" {
			return s
		}
		return resp.Trailer.Get("Grpc-Status")
	}

	if resp, b := call("/svc.S/Unary", "10S", http.NoBody); status(resp) != "0" || string(b) != "\x00\x00\x00\x00\x01z" {
		t.Fatalf("a unary call slower than UpstreamTimeout within its grpc-timeout: status %q %q, want 0", status(resp), b)
	}
	for _, timeout := range []string{"", "1m"} {
		resp, _ := call("/svc.S/Unary", timeout, http.NoBody)
		msg, _ := url.PathUnescape(resp.Header.Get("Grpc-Message"))
		if status(resp) != "4" || msg != "w.p2p did not answer in time" {
			t.Fatalf("a unary call slower than UpstreamTimeout, grpc-timeout %q: status %q %q, want 4", timeout, status(resp), msg)
		}
	}

	// A client stream that takes longer than the wait, answered at its
	// end.
	pr, pw := io.Pipe()
	go func() {
		for range 4 {
			_, _ = pw.Write([]byte{0, 0, 0, 0, 1, 'a'})
			time.Sleep(quietTimeout)
		}
		_ = pw.Close()
	}()
	if resp, b := call("/svc.S/ClientStream", "", pr); status(resp) != "0" || string(b) != "\x00\x00\x00\x00\x01z" {
		t.Fatalf("a client stream longer than the wait: status %q %q, want 0", status(resp), b)
	}

	// A bidirectional stream whose head came before its request ended,
	// and whose answer goes on for longer than the wait after that.
	pr, pw = io.Pipe()
	go func() {
		for i := range 4 {
			_, _ = pw.Write([]byte{0, 0, 0, 0, 1, 'a' + byte(i)})
			time.Sleep(quietTimeout)
		}
		_ = pw.Close()
	}()
	if resp, b := call("/svc.S/Bidi", "", pr); status(resp) != "0" || string(b) != "\x00\x00\x00\x00\x01a\x00\x00\x00\x00\x01b\x00\x00\x00\x00\x01c\x00\x00\x00\x00\x01d\x00\x00\x00\x00\x01z" {
		t.Fatalf("a bidirectional stream: status %q %q, want 0 and every message", status(resp), b)
	}
}
