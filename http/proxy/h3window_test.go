package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// The edge's HTTP/3 receive windows hold a connection's unread request
// bodies to H2Window however its windows grew: a client first sends
// 4 MiB on one stream to a reader that takes it as fast as it comes
// (quic-go grows the windows then), then the reader stops, and the
// client writes on that stream and on eight new ones until its writes
// block. What it got written beyond what was read is what the edge would
// hold (with quic-go's own maxima, 3.1 MB in this test).
func TestEdgeHTTP3WindowsBoundUnreadBodies(t *testing.T) {
	ca, cert := testLeaf(t, "site.p2p")
	ln, err := quic.ListenAddr("127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"h3"}},
		h3QUICConfig(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })

	const first = 4 << 20
	var read atomic.Int64
	stop := make(chan struct{}) // the reader stops reading
	done := make(chan struct{}) // the test is over
	firstRead := make(chan error, 1)
	go func() {
		c, err := ln.Accept(context.Background())
		if err != nil {
			firstRead <- err
			return
		}
		defer c.CloseWithError(0, "")
		s, err := c.AcceptStream(context.Background())
		if err != nil {
			firstRead <- err
			return
		}
		n, err := io.CopyN(io.Discard, s, first)
		read.Add(n)
		firstRead <- err
		<-stop
		<-done // streams stay open, unread, until the test ends
	}()
	defer close(done)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := quic.DialAddr(ctx, ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "site.p2p", NextProtos: []string{"h3"}},
		&quic.Config{MaxIncomingStreams: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	s0, err := c.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 16<<10)
	var written atomic.Int64
	for sent := 0; sent < first; sent += len(chunk) {
		n, err := s0.Write(chunk)
		written.Add(int64(n))
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := <-firstRead; err != nil {
		t.Fatalf("the first %d bytes were not read: %v", first, err)
	}
	close(stop)

	streams := []*quic.Stream{s0}
	for range 8 {
		s, err := c.OpenStreamSync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	// Each writer writes until its stream's credit is spent and its
	// write deadline passes: a deadline, not a wait for something.
	var wg sync.WaitGroup
	for _, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.SetWriteDeadline(time.Now().Add(2 * time.Second))
			for {
				n, err := s.Write(chunk)
				written.Add(int64(n))
				if err != nil {
					if !errors.Is(err, os.ErrDeadlineExceeded) {
						t.Errorf("write: %v", err)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	unread := written.Load() - read.Load()
	t.Logf("written %d, read %d: %d unread", written.Load(), read.Load(), unread)
	// quic-go's Write reports the last bytes of a write as written once
	// at most a packet's worth is left (1,452 bytes), copied into the
	// stream's own buffer whether or not it has the credit to send them:
	// each stream may count that much that never left the client.
	const heldByClient = 1452
	if limit := int64(H2Window + len(streams)*heldByClient); unread > limit {
		t.Fatalf("the client got %d bytes written that nobody read, want at most %d (the window and what its streams hold)", unread, limit)
	}
	if unread < H2Window/2 {
		t.Fatalf("only %d bytes written beyond those read: the windows did not open", unread)
	}
}
