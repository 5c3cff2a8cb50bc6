package transport

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// A peer not admitted yet cannot make a stream path hold more than the
// gate's budget of what it sends: it opens streams nobody accepts and
// fills them (each could take yamux's 256 KiB window, 64 MiB over the
// accept backlog), and the acceptor stops reading at the budget. Once
// admitted, every byte it sent arrives: the gate loses nothing.
func TestStreamPathGatesPeersNotAdmitted(t *testing.T) {
	a, b := newMulti(t, Options{}), newMulti(t, Options{})
	out, err := b.DialTCP(ctxT(t), a.Addr().String(), a.ID())
	if err != nil {
		t.Fatal(err)
	}
	in, err := a.Accept(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	sc := in.(*streamConn)
	budget := int64(sc.cfg.InitialConnectionReceiveWindow)
	const streams, each = 32, 200 << 10 // 6.25 MiB: over the budget, under the windows
	payload := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, each) }
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	opened := make([]Stream, streams)
	for i := range opened { // all opened first: a SYN would queue behind the data
		if opened[i], err = out.OpenStream(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range opened {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Write(append([]byte{byte(i)}, payload(i)...)); err != nil {
				errs <- fmt.Errorf("stream %d: %w", i, err)
				return
			}
			errs <- s.CloseWrite()
		}()
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if !goroutineWith("[select]", "(*gatedConn).Read") {
			return fmt.Errorf("the acceptor still reads (%d of the budget of %d left)", sc.gate.left.Load(), budget)
		}
		return nil
	})
	if left := sc.gate.left.Load(); left != 0 {
		t.Fatalf("the reader waits with %d of the budget left", left)
	}

	in.Admit()
	for range streams {
		s, err := in.AcceptStream(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		_ = s.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(s)
		if err != nil || len(got) != 1+each || !bytes.Equal(got[1:], payload(int(got[0]))) {
			t.Fatalf("after Admit: %d bytes, %v", len(got), err)
		}
		s.Close()
	}
	wg.Wait()
	for range streams {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
