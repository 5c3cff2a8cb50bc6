package api

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

// TestCompressionInRenderSlots: an answer is compressed inside its
// render slot, before serveConn counts it against the send budget: the
// budget holds what the connection holds, the compressed answer. (Done
// after the slot was given back, 2,000 clients asking at once for a
// 177 KB answer each held a compressor and both copies of their answer
// together: 300 MB of RSS, 62 MB in the slot; and the budget was charged
// the uncompressed size.)
func TestCompressionInRenderSlots(t *testing.T) {
	env := newTestEnv(t, func(o *Options) { o.sendBudget, o.writeTimeout = 1<<20, 10*time.Minute })
	// Random values: the compressed answer (several MB) is more than the
	// sockets' buffers take, so it waits in the agent for its reader.
	r := rand.New(rand.NewPCG(1, 2))
	addChart(t, env, "big.chart", 1500, 600, func(int64, int) float64 { return r.Float64() * 1e6 })
	const bigPath = "/api/v1/data?chart=big.chart&after=-600&points=600"
	plain := env.get(t, bigPath)
	if plain.status != 200 {
		t.Fatalf("big answer: %d", plain.status)
	}
	addr := strings.TrimPrefix(env.url, "http://")
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "GET %s&stuck=1 HTTP/1.1\r\nHost: %s\r\nAccept-Encoding: gzip\r\n\r\n", bigPath, addr); err != nil {
		t.Fatal(err)
	}
	var held int64
	// Seconds to build under the race detector: the bound is for a hang.
	testutil.Eventually(t, 60*time.Second, func() error {
		env.srv.sends.mu.Lock()
		defer env.srv.sends.mu.Unlock()
		if held = env.srv.sends.total; held == 0 {
			return errors.New("the stuck reader's answer is not held yet")
		}
		return nil
	})
	if held >= int64(len(plain.body))*3/4 {
		t.Errorf("a gzip client's answer is charged %d bytes, the uncompressed answer is %d: want the compressed size", held, len(plain.body))
	}
}
