package transport

import (
	"errors"
	"strings"
	"testing"
	"time"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// A stream path closed as replaced while a control write waits for a
// peer that does not read still closes its byte stream at
// replacedLinger: the notice does not wait out that write's timeout.
func TestReplacedLingerBoundedBehindWaitingSend(t *testing.T) {
	a := newMulti(t, Options{})
	b := newMulti(t, Options{})
	closer, _ := tcpPair(t, b, a) // a never reads the control stream
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		m := &messages.Envelope{Kind: messages.KindHello, Hello: &messages.Hello{ID: "x", Network: strings.Repeat("n", 512<<10)}}
		for closer.Send(m) == nil {
		}
	}()
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, g := range strings.Split(stacks(), "\n\n") {
			// Its first frame: waiting for the peer's window.
			if lines := strings.Split(g, "\n"); len(lines) > 1 && strings.Contains(g, "(*streamConn).Send") &&
				strings.HasPrefix(lines[1], "github.com/hashicorp/yamux.(*Stream).write(") {
				return nil
			}
		}
		return errors.New("no control write waits for the peer's window yet")
	})
	start := time.Now()
	if err := closer.Close(ReasonReplaced); err != nil {
		t.Fatal(err)
	}
	sc := closer.(*streamConn)
	testutil.Eventually(t, 2*replacedLinger, func() error {
		if !sc.sess.IsClosed() {
			return errors.New("the closer's byte stream is still open")
		}
		return nil
	})
	t.Logf("byte stream closed %v after the close", time.Since(start).Round(time.Millisecond))
	<-sent
}
