package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// gatherPair is a connected TCP pair on loopback: the server side wrapped
// as the HTTPS listener wraps it, gathering its writes, and the client.
func gatherPair(t *testing.T, writeTimeout time.Duration) (*movingDeadlines, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	cl, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc := <-acc
	if sc == nil {
		t.Fatal("accept failed")
	}
	mc := &movingDeadlines{Conn: sc}
	mc.wr.every.Store(int64(writeTimeout))
	mc.gather()
	t.Cleanup(func() {
		cl.Close()
		sc.Close()
	})
	return mc, cl
}

// writePieces writes n pieces of 1 to most bytes, each of its own byte,
// to mc and returns what it wrote, in order.
func writePieces(t *testing.T, mc *movingDeadlines, n, most int) []byte {
	t.Helper()
	var all bytes.Buffer
	for i := range n {
		b := bytes.Repeat([]byte{byte(i)}, 1+i%most)
		all.Write(b)
		if _, err := mc.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	return all.Bytes()
}

// What is written reaches the client whole and in order, and what is
// pending at Close is written before the connection closes.
func TestGatherWritesInOrderAndBeforeClose(t *testing.T) {
	mc, cl := gatherPair(t, 5*time.Second)
	want := writePieces(t, mc, 2000, 700)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(cl)
		got <- b
	}()
	if err := mc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v, want net.ErrClosed", err)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, want) {
			t.Fatalf("client read %d bytes, want %d in order", len(b), len(want))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the connection was not closed after its pending writes")
	}
}

// CloseWrite ends the sending side after what is pending: the client
// reads every byte and then the end, while what it sends still reaches
// the server; a write after it fails.
func TestGatherCloseWriteAfterPending(t *testing.T) {
	mc, cl := gatherPair(t, 5*time.Second)
	want := writePieces(t, mc, 200, 900)
	if err := mc.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after CloseWrite: %v, want net.ErrClosed", err)
	}
	_ = cl.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(cl)
	if err != nil || !bytes.Equal(b, want) {
		t.Fatalf("client read %d bytes (%v), want %d in order and then the end", len(b), err, len(want))
	}
	if _, err := cl.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	_ = mc.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 5)
	if _, err := io.ReadFull(mc, got); err != nil || string(got) != "after" {
		t.Fatalf("server read %q (%v) after its CloseWrite, want \"after\"", got, err)
	}
}

// A connection the edge ends with an error GOAWAY (a client's protocol
// error) lingers, reading what the client still sends, but its end
// follows the GOAWAY at once: the client reads the GOAWAY and then the
// end well before the linger is over, though it keeps its side open.
func TestH2ErrorGoAwayThenEnd(t *testing.T) {
	up, _ := http1Upstream(t)
	e := newTestH2Edge(t, map[string]string{"h1.p2p": up}, Deps{})
	_, httpsAddr := e.s.Addrs()
	conf := e.rootTLS()
	conf.ServerName = "h1.p2p"
	conf.NextProtos = []string{"h2"}
	c, err := dialRawH2(httpsAddr.String(), conf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.conn.Close()
	// A stream id a client may not open (even): PROTOCOL_ERROR for the
	// whole connection.
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2, BlockFragment: c.block, EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.bw.Flush(); err != nil {
		t.Fatal(err)
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("read before the GOAWAY: %v", err)
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			if ga.ErrCode != http2.ErrCodeProtocol {
				t.Fatalf("GOAWAY %v, want PROTOCOL_ERROR", ga.ErrCode)
			}
			break
		}
	}
	// Half of h2srv's linger (a second): its end came with the linger's
	// start, not with its close.
	_ = c.conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err = c.fr.ReadFrame()
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("after the GOAWAY: %v, want the connection's end within half of the linger", err)
	}
}

// A client that reads nothing: the writer is held at gatherMax pending
// bytes, the write deadline fails the system call, and the error comes
// back to the writer, which would otherwise wait forever.
func TestGatherStalledReaderFails(t *testing.T) {
	mc, _ := gatherPair(t, 300*time.Millisecond)
	errc := make(chan error, 1)
	go func() {
		b := make([]byte, 16<<10)
		for {
			if _, err := mc.Write(b); err != nil {
				errc <- err
				return
			}
		}
	}()
	select {
	case err := <-errc:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("write error %v, want the write deadline's", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writes to a client that reads nothing did not fail")
	}
	// The connection is closed: a read on it fails too.
	if _, err := mc.Read(make([]byte, 1)); err == nil {
		t.Fatal("read on a connection whose write failed succeeded")
	}
	if _, err := mc.Write([]byte("x")); err == nil {
		t.Fatal("write after a failed write succeeded")
	}
}

// HTTP/2 over TLS 1.2: a connection with an AEAD cipher suite is served
// (its writes gathered, as TLS 1.3 ones are), one with a suite RFC 9113
// Appendix A forbids is refused with INADEQUATE_SECURITY (h2srv's
// check).
func TestH2TLS12Ciphers(t *testing.T) {
	up, _ := http1Upstream(t)
	e := newTestH2Edge(t, map[string]string{"h1.p2p": up}, Deps{})
	_, httpsAddr := e.s.Addrs()
	for _, tc := range []struct {
		suite uint16
		ok    bool
	}{
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, true},
		{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, true},
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, false},
	} {
		t.Run(tls.CipherSuiteName(tc.suite), func(t *testing.T) {
			conf := e.rootTLS()
			conf.ServerName = "h1.p2p"
			conf.MaxVersion = tls.VersionTLS12
			conf.CipherSuites = []uint16{tc.suite}
			c, err := dialRawH2(httpsAddr.String(), conf)
			if err != nil {
				t.Fatal(err)
			}
			defer c.conn.Close()
			if st := c.conn.ConnectionState(); st.CipherSuite != tc.suite || st.NegotiatedProtocol != "h2" {
				t.Fatalf("negotiated %s, %q", tls.CipherSuiteName(st.CipherSuite), st.NegotiatedProtocol)
			}
			_ = c.conn.SetDeadline(time.Now().Add(5 * time.Second))
			if tc.ok { // else the server refuses the connection at once: nothing to ask
				if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.block, EndStream: true, EndHeaders: true}); err != nil {
					t.Fatal(err)
				}
				if err := c.bw.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			for {
				f, err := c.fr.ReadFrame()
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				switch f := f.(type) {
				case *http2.GoAwayFrame:
					if tc.ok || f.ErrCode != http2.ErrCodeInadequateSecurity {
						t.Fatalf("GOAWAY %v", f.ErrCode)
					}
					return
				case *http2.HeadersFrame:
					if !tc.ok {
						t.Fatal("a response on a connection with a forbidden cipher suite")
					}
					return
				}
			}
		})
	}
}
