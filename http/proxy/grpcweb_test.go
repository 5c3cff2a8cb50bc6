package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestIsGRPC(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/grpc": true, "application/grpc+proto": true, "application/grpc+json": true,
		"application/grpc; charset=utf-8": true, "Application/GRPC": true,
		"application/grpc-web": false, "application/grpc-web+proto": false, "application/grpc-web-text": false,
		"application/grpcx": false, "application/json": false, "": false, "application/grp": false,
	} {
		r, _ := http.NewRequest("POST", "https://w.p2p/", nil)
		r.Header.Set("Content-Type", ct)
		if got := isGRPC(r); got != want {
			t.Errorf("isGRPC(%q) = %v, want %v", ct, got, want)
		}
	}
}

// gRPC-Web, what a browser speaks to a gRPC service (connect-web,
// grpc-web), is plain HTTP: over HTTP/2 and HTTP/3 it reaches an
// HTTP/1.1 upstream as any request does, not as gRPC (which needs
// HTTP/2 to the upstream, and failed UNAVAILABLE there).
func TestEdgeGRPCWebToHTTP1(t *testing.T) {
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		// The message back, then the trailers frame gRPC-Web puts in
		// the body.
		_, _ = w.Write(append([]byte{0, 0, 0, 0, byte(len(b))}, b...))
		_, _ = io.WriteString(w, "\x80\x00\x00\x00\x0fgrpc-status:0\r\n")
		_, _ = io.WriteString(w, r.Proto)
	})
	e := startTestEdge(t, map[string]string{"w.p2p": up}, Deps{})
	h3 := &http.Client{Transport: e.h3(t, "w.p2p")}
	for _, c := range []*http.Client{e.c, h3} {
		for _, ct := range []string{"application/grpc-web+proto", "application/grpc-web-text"} {
			req, _ := http.NewRequest(http.MethodPost, "https://w.p2p/svc.S/M", strings.NewReader("\x00\x00\x00\x00\x02hi"))
			req.Header.Set("Content-Type", ct)
			req.Header.Set("X-Grpc-Web", "1")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := "\x00\x00\x00\x00\x07\x00\x00\x00\x00\x02hi\x80\x00\x00\x00\x0fgrpc-status:0\r\nHTTP/1.1"
			if resp.StatusCode != 200 || string(b) != want || resp.Header.Get("Content-Type") != ct {
				t.Fatalf("%s over %s: %d %q (%s), want 200 %q", ct, resp.Proto, resp.StatusCode, b, resp.Header.Get("Content-Type"), want)
			}
		}
	}
}
