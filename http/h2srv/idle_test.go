package h2srv

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestIdleEvenStream: the server opens no stream (no push), so every
// even-numbered stream is idle, and a RST_STREAM, WINDOW_UPDATE or
// DATA on one is a connection error PROTOCOL_ERROR (RFC 9113 §5.1),
// whatever the client's own stream ids have reached.
func TestIdleEvenStream(t *testing.T) {
	for _, typ := range []string{"RST_STREAM", "WINDOW_UPDATE", "DATA"} {
		t.Run(typ, func(t *testing.T) {
			ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			rc := newRawClient(t, ts.addr)
			rc.headers(1, true, rc.block("GET", "/"))
			rc.headers(3, true, rc.block("GET", "/"))
			rc.ping()
			var err error
			switch typ {
			case "RST_STREAM":
				err = rc.fr.WriteRSTStream(2, http2.ErrCodeCancel)
			case "WINDOW_UPDATE":
				err = rc.fr.WriteWindowUpdate(2, 1)
			default:
				err = rc.fr.WriteData(2, true, []byte("x"))
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := rc.fr.WritePing(false, [8]byte{}); err != nil {
				t.Fatal(err)
			}
			if code := rc.closed(10 * time.Second); code != http2.ErrCodeProtocol {
				t.Fatalf("GOAWAY %v, want PROTOCOL_ERROR", code)
			}
		})
	}
}

// TestZeroWindowUpdateIdle: a WINDOW_UPDATE of zero on an idle stream
// is a connection error PROTOCOL_ERROR as any WINDOW_UPDATE there (RFC
// 9113 §5.1), not a stream error: the server sends no RST_STREAM on an
// idle stream (§6.4), nor takes the stream for opened.
func TestZeroWindowUpdateIdle(t *testing.T) {
	for _, id := range []uint32{2, 5} {
		t.Run(fmt.Sprint(id), func(t *testing.T) {
			ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			rc := newRawClient(t, ts.addr)
			rc.fr.AllowIllegalWrites = true
			rc.headers(1, true, rc.block("GET", "/"))
			rc.ping()
			if err := rc.fr.WriteWindowUpdate(id, 0); err != nil {
				t.Fatal(err)
			}
			if err := rc.fr.WritePing(false, [8]byte{}); err != nil {
				t.Fatal(err)
			}
			code := http2.ErrCode(1 << 31)
			rc.next(10*time.Second, func(f http2.Frame, err error) bool {
				switch f := f.(type) {
				case *http2.RSTStreamFrame:
					if f.StreamID == id {
						t.Fatalf("RST_STREAM %v on idle stream %d", f.ErrCode, id)
					}
				case *http2.GoAwayFrame:
					code = f.ErrCode
					return true
				case *http2.PingFrame:
					return f.IsAck() && f.Data == [8]byte{}
				}
				return err != nil
			})
			if code != http2.ErrCodeProtocol {
				t.Fatalf("GOAWAY %v, want PROTOCOL_ERROR", code)
			}
		})
	}
}
