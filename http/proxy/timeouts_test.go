package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// countingConn counts the deadlines set on a real TCP connection.
type countingConn struct {
	net.Conn
	reads, writes int
}

func (c *countingConn) SetReadDeadline(t time.Time) error {
	c.reads++
	return c.Conn.SetReadDeadline(t)
}

func (c *countingConn) SetWriteDeadline(t time.Time) error {
	c.writes++
	return c.Conn.SetWriteDeadline(t)
}

func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestMovingDeadlinesSetOncePerEighth: a burst of reads and writes moves
// each deadline once, and a deadline set from outside (as fasthttp sets
// one at each request) is not moved again by the next operation.
func TestMovingDeadlinesSetOncePerEighth(t *testing.T) {
	a, b := tcpPair(t)
	cc := &countingConn{Conn: a}
	c := &movingDeadlines{Conn: cc}
	c.rd.every.Store(int64(time.Minute))
	c.wr.every.Store(int64(time.Minute))
	buf := make([]byte, 1)
	for i := 0; i < 100; i++ {
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	if cc.reads != 1 || cc.writes != 1 {
		t.Fatalf("100 reads and writes set %d read and %d write deadlines, want 1 each", cc.reads, cc.writes)
	}
	if err := c.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if cc.writes != 2 {
		t.Fatalf("a write after a fresh outside deadline set %d more", cc.writes-2)
	}
	// The zero time (fasthttp's, from a client or server without
	// timeouts of its own, at each exchange) does not clear a moving
	// deadline: nothing is put on the connection, then or at the next
	// write, on either side.
	for range 3 {
		if err := c.SetWriteDeadline(time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := c.SetReadDeadline(time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := c.SetDeadline(time.Time{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	if cc.writes != 2 || cc.reads != 1 {
		t.Fatalf("zero deadlines and writes after them: %d write and %d read deadlines set, want 2 and 1", cc.writes, cc.reads)
	}
	// On a side that does not move, the zero time clears the deadline.
	c.rd.every.Store(0)
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if cc.reads != 2 {
		t.Fatalf("a cleared read deadline on a side that does not move: %d read deadlines set, want 2", cc.reads)
	}
}

// TestMovingDeadlinesCutSilence: a peer that sends a byte every tenth of
// the timeout is never cut over more than two timeouts; one that then
// goes silent is, after between 7/8 of the timeout and the whole of it.
// A run is judged only if the peer kept its pace (a loaded machine can
// stall its goroutine for most of a timeout); otherwise it runs again
// with twice the timeout, up to 8 s.
func TestMovingDeadlinesCutSilence(t *testing.T) {
	for timeout := time.Second; ; timeout *= 2 {
		verdict, judged := cutSilence(t, timeout)
		if judged {
			if verdict != "" {
				t.Fatal(verdict)
			}
			return
		}
		if timeout >= 8*time.Second {
			t.Fatalf("the steady peer stalled for most of the timeout up to %v: %s", timeout, verdict)
		}
		t.Logf("timeout %v: %s; again with twice the timeout", timeout, verdict)
	}
}

// cutSilence runs the check once; judged is false when the writer's own
// pace broke (a gap of 7/8 of timeout or more between two of its writes).
func cutSilence(t *testing.T, timeout time.Duration) (verdict string, judged bool) {
	a, b := tcpPair(t)
	c := &movingDeadlines{Conn: a}
	c.rd.every.Store(int64(timeout))
	var mu sync.Mutex
	var maxGap time.Duration
	go func() {
		last := time.Now()
		for i := 0; i < 25; i++ { // 2.5 timeouts, more than two
			if _, err := b.Write([]byte{1}); err != nil {
				return
			}
			now := time.Now()
			mu.Lock()
			maxGap = max(maxGap, now.Sub(last))
			mu.Unlock()
			last = now
			time.Sleep(timeout / 10) // the peer's pace, not a wait for a result
		}
	}()
	stalled := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return maxGap >= timeout*7/8
	}
	buf := make([]byte, 1)
	for i := 0; i < 25; i++ {
		if _, err := c.Read(buf); err != nil {
			if stalled() {
				return fmt.Sprintf("the writer stalled (read %d: %v)", i, err), false
			}
			return fmt.Sprintf("read %d of a steady peer: %v", i, err), true
		}
	}
	start := time.Now()
	_, err := c.Read(buf)
	took := time.Since(start)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Sprintf("a silent peer: %v, want a deadline error", err), true
	}
	if took < timeout*7/8-timeout/10 {
		return fmt.Sprintf("a silent peer was cut after %v, before 7/8 of %v", took, timeout), true
	}
	return "", true
}

// TestLazyDeadlinesWaitForTheOperation: on a lazy connection the
// deadlines fasthttp sets at every request (a later one, then an earlier
// one, then the later one again) put nothing on the connection until an
// operation needs one, and then only one that is more than an eighth of
// the time left off the one in force. A deadline held that way still
// cuts the read it was set for; a deadline in the past is put on at
// once, so it stops a read in progress in another goroutine.
func TestLazyDeadlinesWaitForTheOperation(t *testing.T) {
	a, b := tcpPair(t)
	cc := &countingConn{Conn: a}
	c := &movingDeadlines{Conn: cc, lazy: true}
	buf := make([]byte, 1)
	for i := 0; i < 100; i++ {
		// The server's pattern: the idle timeout before the head, the
		// head's read timeout once its first byte came, the write
		// timeout before the answer.
		if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
		if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := c.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	if cc.reads != 1 || cc.writes != 1 {
		t.Fatalf("100 requests put %d read and %d write deadlines on the connection, want 1 each", cc.reads, cc.writes)
	}

	// A held earlier deadline is put on by the read it is for, and cuts it.
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past its deadline: %v, want a deadline error", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the read was cut after %v, its deadline was 50 ms", took)
	}
	if cc.reads != 2 {
		t.Fatalf("%d read deadlines put on, want 2", cc.reads)
	}

	// A deadline in the past stops a read already waiting.
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(buf)
		done <- err
	}()
	// Whether the read is waiting yet or not, the halt must end it.
	c.haltRead()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a halted read: %v, want a deadline error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a halted read went on waiting")
	}

	// On an upstream's connection (its deadlines moving, held for the
	// operation) every read and write after a halt fails at once too,
	// however the halt and the operations fall: one that moved the
	// deadline out again must not leave it there for the one after (the
	// head reader reads again after a failed read).
	for i := range 20 {
		a, _ := tcpPair(t)
		m := &movingDeadlines{Conn: a, lazy: true}
		m.rd.every.Store(int64(time.Minute))
		m.wr.every.Store(int64(time.Minute))
		if i%2 == 1 { // a deadline held for the next operation
			_ = m.SetReadDeadline(time.Now().Add(time.Minute))
			_ = m.SetWriteDeadline(time.Now().Add(time.Minute))
		}
		m.halter()()
		for j := range 3 {
			go func() {
				_, err := m.Read(buf)
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("read %d after the halt: %v, want a deadline error", j, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("read %d after the halt went on waiting", j)
			}
			if _, err := m.Write(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("write %d after the halt: %v, want a deadline error", j, err)
			}
		}
	}
}

// A write that failed (a client that read nothing for WriteTimeout)
// ends the connection's writing: what its closing still writes (the TLS
// close_notify alert, to which crypto/tls gives 5 s of its own) fails at
// once. Before, that write moved the deadline WriteTimeout ahead again,
// and an HTTPS client that reads nothing held its connection, its
// goroutine and its buffers for twice WriteTimeout.
func TestFailedWriteEndsWriting(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"t.p2p"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	client, server := tcpPair(t)
	_ = client.(*net.TCPConn).SetReadBuffer(4096)
	const every = 300 * time.Millisecond
	mc := &movingDeadlines{Conn: server}
	mc.wr.every.Store(int64(every))
	srv := tls.Server(mc, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	cli := tls.Client(client, &tls.Config{InsecureSkipVerify: true})
	done := make(chan error, 1)
	go func() { done <- cli.Handshake() }()
	if err := srv.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The client reads nothing more: the writes fill the buffers, then
	// one waits out the moving deadline and fails.
	chunk := make([]byte, 64<<10)
	for {
		if _, err := srv.Write(chunk); err != nil {
			break
		}
	}
	start := time.Now()
	_ = srv.Close()
	if el := time.Since(start); el > every {
		t.Fatalf("Close after a failed write took %v: its alert waited on a client that reads nothing", el)
	}
}
