package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// rawCodec passes gRPC messages as the bytes they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

// A gRPC upstream in TLS (a claim with ssl: true) that goes away in the
// middle of a call the client keeps open ends that call with
// UNAVAILABLE, as one in h2c does: TLS reads the upstream's close_notify
// and no read of the connection under it fails, so the call is ended by
// the connection's close.
func TestEdgeGRPCTLSUpstreamGoneMidStream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := newTestH2Edge(t, map[string]string{"gs.p2p": ln.Addr().String()}, Deps{})
	e.s.d.View.Load().Domains["gs.p2p"].SSL = true
	cert, err := e.s.d.CA.Certificate("gs.p2p", netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.Creds(credentials.NewServerTLSFromCert(cert)))
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "edge.Echo", HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Die", ServerStreams: true, ClientStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
			var in []byte
			if err := st.RecvMsg(&in); err != nil {
				return err
			}
			out := []byte("last words")
			if err := st.SendMsg(&out); err != nil {
				return err
			}
			// The client's second message says the first came.
			if err := st.RecvMsg(&in); err != nil {
				return err
			}
			go srv.Stop()
			<-st.Context().Done()
			return st.Context().Err()
		}}},
	}, struct{}{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	_, httpsAddr := e.s.Addrs()
	cc, err := grpc.Dial("passthrough:///gs.p2p",
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: e.s.d.CA.Pool(), ServerName: "gs.p2p"})),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", httpsAddr.String())
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/edge.Echo/Die")
	if err != nil {
		t.Fatal(err)
	}
	in, out := []byte("ping"), []byte(nil)
	if err := st.SendMsg(&in); err != nil {
		t.Fatal(err)
	}
	if err := st.RecvMsg(&out); err != nil || string(out) != "last words" {
		t.Fatalf("first message: %v %q", err, out)
	}
	if err := st.SendMsg(&in); err != nil {
		t.Fatal(err)
	}
	err = st.RecvMsg(&out)
	if s, _ := status.FromError(err); s.Code() != codes.Unavailable || ctx.Err() != nil {
		t.Fatalf("the upstream went away mid-stream: %v, want Unavailable from the edge", err)
	}
}
