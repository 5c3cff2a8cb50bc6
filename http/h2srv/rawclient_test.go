package h2srv

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawClient speaks HTTP/2 frame by frame over TLS, to send what a
// well-behaved client never would.
type rawClient struct {
	t    testing.TB
	nc   *tls.Conn
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
}

func newRawClient(t testing.TB, addr string, settings ...http2.Setting) *rawClient {
	t.Helper()
	nc, err := tls.Dial("tcp", addr, clientTLS())
	if err != nil {
		t.Fatal(err)
	}
	return rawClientOn(t, nc, settings...)
}

// rawClientOn is newRawClient on a TLS connection dialed already.
func rawClientOn(t testing.TB, nc *tls.Conn, settings ...http2.Setting) *rawClient {
	t.Helper()
	if err := nc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if p := nc.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q, want h2", p)
	}
	t.Cleanup(func() { _ = nc.Close() })
	rc := &rawClient{t: t, nc: nc, fr: http2.NewFramer(nc, nc)}
	rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	rc.enc = hpack.NewEncoder(&rc.hbuf)
	if _, err := io.WriteString(nc, clientPreface); err != nil {
		t.Fatal(err)
	}
	if err := rc.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	return rc
}

// block encodes a request's header block: pseudo fields for method and
// path (none when method is empty: a trailer block), then extra
// name/value pairs.
func (rc *rawClient) block(method, path string, extra ...string) []byte {
	rc.hbuf.Reset()
	var fields []string
	if method != "" { // else a trailer block
		fields = []string{":method", method, ":scheme", "https", ":path", path, ":authority", "localhost"}
	}
	fields = append(fields, extra...)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = rc.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return bytes.Clone(rc.hbuf.Bytes())
}

func (rc *rawClient) headers(id uint32, end bool, block []byte) {
	rc.t.Helper()
	err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: end, EndHeaders: true})
	if err != nil {
		rc.t.Fatal(err)
	}
}

// next reads frames until match accepts one, failing after within.
// A read error (the connection closed) is given to match as nil frame
// with the error.
func (rc *rawClient) next(within time.Duration, match func(f http2.Frame, err error) bool) {
	rc.t.Helper()
	_ = rc.nc.SetReadDeadline(time.Now().Add(within))
	defer func() { _ = rc.nc.SetReadDeadline(time.Time{}) }()
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				continue
			}
			if match(nil, err) {
				return
			}
			rc.t.Fatalf("read: %v", err)
		}
		if match(f, nil) {
			return
		}
	}
}

// closed reads until the server closes the connection and reports the
// GOAWAY code it sent before (-1 if none).
func (rc *rawClient) closed(within time.Duration) http2.ErrCode {
	rc.t.Helper()
	code := http2.ErrCode(1 << 31)
	rc.next(within, func(f http2.Frame, err error) bool {
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				rc.t.Fatalf("connection still open after %v", within)
			}
			return true
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			code = g.ErrCode
		}
		return false
	})
	return code
}

// response reads stream id's response: status, body, and how it ended
// ("end", or "rst CODE").
func (rc *rawClient) response(id uint32, within time.Duration) (status string, body []byte, end string) {
	rc.t.Helper()
	rc.next(within, func(f http2.Frame, err error) bool {
		if err != nil {
			end = "closed: " + err.Error()
			return true
		}
		if f.Header().StreamID != id {
			return false
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if s := f.PseudoValue("status"); s != "" && s[0] != '1' {
				status = s
			}
			if f.StreamEnded() {
				end = "end"
			}
		case *http2.DataFrame:
			body = append(body, f.Data()...)
			if f.StreamEnded() {
				end = "end"
			}
		case *http2.RSTStreamFrame:
			end = fmt.Sprint("rst ", f.ErrCode)
		}
		return end != ""
	})
	return status, body, end
}

// ping sends a PING and waits for its ACK: every frame sent before it
// has been handled by the server.
func (rc *rawClient) ping() {
	rc.t.Helper()
	data := [8]byte{'b', 'a', 'r', 'r', 'i', 'e', 'r', '!'}
	if err := rc.fr.WritePing(false, data); err != nil {
		rc.t.Fatal(err)
	}
	rc.next(10*time.Second, func(f http2.Frame, err error) bool {
		if err != nil {
			rc.t.Fatalf("waiting for a PING ACK: %v", err)
		}
		p, ok := f.(*http2.PingFrame)
		return ok && p.IsAck() && p.Data == data
	})
}
