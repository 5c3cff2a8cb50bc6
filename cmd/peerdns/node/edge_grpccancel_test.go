package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"peerdns/internal/testutil"
)

// grpcHold serves edge.Hold/Watch in h2c: it answers the first message
// and then holds the call open until its context ends, sending why on
// ended. A watch whose client has gone must not stay open behind the
// edge.
func grpcHold(t *testing.T, ended chan<- error) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "edge.Hold", HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Watch", ServerStreams: true, ClientStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
			var in []byte
			if err := st.RecvMsg(&in); err != nil {
				return err
			}
			out := []byte("watching")
			if err := st.SendMsg(&out); err != nil {
				return err
			}
			<-st.Context().Done()
			ended <- st.Context().Err()
			return st.Context().Err()
		}}},
	}, struct{}{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().(*net.TCPAddr).Port
}

// A gRPC client that cancels a call it holds open through the edge and
// a tunnel (a watch it no longer wants) ends the call at the upstream
// too, over HTTP/2 and over HTTP/3, while the client's connection stays
// up: cancelled calls do not pile up on the service behind a claim.
func TestEdgeGRPCCancelReachesUpstream(t *testing.T) {
	nodes := newNetwork(t, 2)
	a, b := nodes[0], nodes[1]
	ended := make(chan error, 4)
	_, url := tunnelServerURL(t, a, fmt.Sprintf(`{"name":"hold","port":%d,"domain":"hold.p2p"}`, grpcHold(t, ended)))
	testutil.Eventually(t, 20*time.Second, func() error {
		if cs := consensusOn(t, b, "hold.p2p"); cs.Status != "resolved" || cs.Hash == nil || *cs.Hash != url {
			return fmt.Errorf("hold.p2p on B: %+v", cs)
		}
		return nil
	})
	_, httpsAddr := b.EdgeAddrs()
	pool := rootPool(t, b)
	upstreamEnded := func(proto string) {
		t.Helper()
		select {
		case err := <-ended:
			if err != context.Canceled {
				t.Fatalf("%s: the upstream's call ended with %v, want canceled", proto, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the client cancelled its call, the upstream still holds it 10 s later", proto)
		}
	}

	// HTTP/2, with grpc-go: cancelling the call resets its stream.
	cc := grpcConn(t, httpsAddr, "hold.p2p", pool)
	for range 2 { // twice on one connection: it stays usable
		ctx, cancel := context.WithCancel(context.Background())
		st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/edge.Hold/Watch")
		if err != nil {
			t.Fatal(err)
		}
		in, got := []byte("watch"), []byte(nil)
		if err := st.SendMsg(&in); err != nil {
			t.Fatal(err)
		}
		if err := st.RecvMsg(&got); err != nil || string(got) != "watching" {
			cancel()
			t.Fatalf("HTTP/2 watch: %v %q", err, got)
		}
		cancel()
		upstreamEnded("HTTP/2")
	}

	// HTTP/3, the gRPC frames by hand: the request's context cancelled
	// once the first answer came.
	c3 := h3Client(t, httpsAddr, pool, nil)
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "https://hold.p2p/edge.Hold/Watch", pr)
	req.Header.Set("Content-Type", "application/grpc+raw")
	req.Header.Set("TE", "trailers")
	go func() { _, _ = pw.Write([]byte{0, 0, 0, 0, 5, 'w', 'a', 't', 'c', 'h'}) }()
	resp, err := c3.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 5+len("watching"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || !strings.HasSuffix(string(first), "watching") {
		t.Fatalf("HTTP/3 watch: %s %d %q %v", resp.Proto, resp.StatusCode, first, err)
	}
	cancel()
	resp.Body.Close()
	upstreamEnded("HTTP/3")
}
