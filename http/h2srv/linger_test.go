package h2srv

import (
	"crypto/tls"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"peerdns/internal/testutil"
)

// TestGoAwayBehindUnreadOutput: a client that sends PINGs without
// reading their answers, then a frame that ends its connection
// (FLOW_CONTROL_ERROR: the connection's window past 2^31-1), then more
// PINGs, reads, once it reads, every answer and then the GOAWAY. With
// small socket buffers at both ends the answers fill them, so when the
// server has written its GOAWAY, the GOAWAY still waits in its send
// buffer; closed with the client's last PINGs unread, the connection
// would be reset by the kernel, which throws that away.
func TestGoAwayBehindUnreadOutput(t *testing.T) {
	var cnt counters
	small := func(c net.Conn) { _ = c.(*net.TCPConn).SetWriteBuffer(16 << 10) }
	ts := newTestServerOn(t, cnt.config(Config{}), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), small)
	raw, err := net.DialTimeout("tcp", ts.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.(*net.TCPConn).SetReadBuffer(16 << 10)
	rc := rawClientOn(t, tls.Client(raw, clientTLS()))
	_ = rc.nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
	const before, after = 6000, 2000
	for range before {
		if err := rc.fr.WritePing(false, [8]byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := rc.fr.WriteWindowUpdate(0, 1<<31-1); err != nil {
			t.Fatal(err)
		}
	}
	// A write that fails means the server stopped reading: it has ended
	// the connection (the frames it did not read are what the kernel
	// would reset it for). Reading begins then.
	for range after {
		if err := rc.fr.WritePing(false, [8]byte{1}); err != nil {
			break
		}
	}
	acks := 0
	code := http2.ErrCode(1 << 31)
	rc.next(10*time.Second, func(f http2.Frame, err error) bool {
		if err != nil {
			t.Fatalf("after %d PING answers: %v", acks, err)
		}
		switch f := f.(type) {
		case *http2.PingFrame:
			acks++
		case *http2.GoAwayFrame:
			code = f.ErrCode
			return true
		}
		return false
	})
	if code != http2.ErrCodeFlowControl || acks != before {
		t.Fatalf("GOAWAY %v after %d PING answers, want FLOW_CONTROL_ERROR after %d", code, acks, before)
	}
}

// TestLingeringBounded: past maxLingering connections lingering at once,
// a connection ended for the client's error is closed at once; the
// lingering one keeps lingering until its client closes.
func TestLingeringBounded(t *testing.T) {
	defer maxLingering.Store(maxLingering.Load())
	maxLingering.Store(1)
	lingered := testutil.Zero(lingering.Load, "connections lingering after their clients closed")
	testutil.Eventually(t, 5*time.Second, lingered) // other tests' connections
	var cnt counters
	ts := newTestServerOn(t, cnt.config(Config{}), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), nil)
	// fail opens a connection and ends it with a FLOW_CONTROL_ERROR
	// (the connection's window past 2^31-1); it returns once the client
	// read the GOAWAY and then the connection's end.
	fail := func() *rawClient {
		rc := newRawClient(t, ts.addr)
		for range 2 {
			if err := rc.fr.WriteWindowUpdate(0, 1<<31-1); err != nil {
				t.Fatal(err)
			}
		}
		code := http2.ErrCode(1 << 31)
		rc.next(10*time.Second, func(f http2.Frame, err error) bool {
			if err != nil {
				t.Fatalf("before the GOAWAY: %v", err)
			}
			if ga, ok := f.(*http2.GoAwayFrame); ok {
				code = ga.ErrCode
				return true
			}
			return false
		})
		if code != http2.ErrCodeFlowControl {
			t.Fatalf("GOAWAY %v, want FLOW_CONTROL_ERROR", code)
		}
		rc.next(10*time.Second, func(f http2.Frame, err error) bool {
			if err == nil {
				t.Fatalf("a frame after the GOAWAY: %v", f)
			}
			return true
		})
		return rc
	}
	first := fail()
	if n := lingering.Load(); n != 1 {
		t.Fatalf("%d connections lingering, want the first", n)
	}
	fail()
	if n := lingering.Load(); n != 1 {
		t.Fatalf("%d connections lingering past maxLingering (1)", n)
	}
	_ = first.nc.Close()
	testutil.Eventually(t, 5*time.Second, lingered)
}
