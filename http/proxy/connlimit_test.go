package proxy

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"peerdns/internal/certs"
)

// TestEdgeConnectionCap: with the cap's connections open (HTTP and
// HTTPS counted together), the next client's connection is not served
// until one of them closes; then it is, its request answered; the
// connections' slots come back as they close, whichever way (a client
// gone, a Connection: close answer).
func TestEdgeConnectionCap(t *testing.T) {
	addr, _ := scriptedUpstream(t, map[string]string{
		"/x": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	})
	ca, err := certs.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Deps{HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", AdminDomain: "admin.p2p", MaxConns: 3,
		View: publishedView(map[string]string{"cap.p2p": "hs://cap"}), Dialer: tcpDialer{"hs://cap": addr}, CA: ca})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	edge, edgeTLS := s.Addrs()
	const req = "GET /x HTTP/1.1\r\nHost: cap.p2p\r\n\r\n"
	ask := func(c net.Conn, br *bufio.Reader) error {
		if _, err := io.WriteString(c, req); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok" {
			return errors.New("answer " + resp.Status + " " + string(b))
		}
		return nil
	}
	open := func(tlsToo bool) (net.Conn, *bufio.Reader) {
		t.Helper()
		var c net.Conn
		var err error
		if tlsToo {
			c, err = tls.Dial("tcp", edgeTLS.String(), &tls.Config{InsecureSkipVerify: true, ServerName: "cap.p2p", NextProtos: []string{"http/1.1"}})
		} else {
			c, err = net.Dial("tcp", edge.String())
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		br := bufio.NewReader(c)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if err := ask(c, br); err != nil {
			t.Fatal(err)
		}
		return c, br
	}
	held := []net.Conn{}
	for _, tlsToo := range []bool{false, true, false} {
		c, _ := open(tlsToo)
		held = append(held, c)
	}

	// The fourth connection is made (the kernel's accept queue) but not
	// served: its request gets no answer while the three stay open.
	c4, err := net.Dial("tcp", edge.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	if _, err := io.WriteString(c4, req); err != nil {
		t.Fatal(err)
	}
	_ = c4.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var one [1]byte
	if n, err := c4.Read(one[:]); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("over the cap: read %d bytes (%v), want no answer yet", n, err)
	}

	// One of the three goes: the fourth is served.
	held[1].Close()
	_ = c4.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c4), nil)
	if err != nil {
		t.Fatalf("after a connection closed: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("after a connection closed: %s %q", resp.Status, b)
	}

	// The edge closing a connection gives its slot back too: a request
	// with Connection: close on a held connection, then a new client.
	if _, err := io.WriteString(held[0], "GET /x HTTP/1.1\r\nHost: cap.p2p\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = held[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, _ := io.ReadAll(held[0]); !strings.HasSuffix(string(got), "ok") {
		t.Fatalf("Connection: close: %q", got)
	}
	c5, err := net.Dial("tcp", edge.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c5.Close()
	_ = c5.SetDeadline(time.Now().Add(10 * time.Second))
	if err := ask(c5, bufio.NewReader(c5)); err != nil {
		t.Fatalf("after the edge closed one: %v", err)
	}
}

// TestCappedAcceptEndsWithItsListener: an Accept whose connection waits
// for a slot returns as soon as its listener is closed, with the error
// fasthttp takes for a closed listener, and closes that connection.
func TestCappedAcceptEndsWithItsListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := betweenWrites{ln, time.Second, true, newConnSlots(1, 0, false, slog.New(slog.DiscardHandler)), newListenerStop()}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	// A second client: Accept takes its connection, then waits for a
	// slot.
	c2, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	done := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Accept over the cap returned %v before the listener closed", err)
	case <-time.After(100 * time.Millisecond):
	}
	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
		// The connection it held unserved is closed with it.
		_ = c2.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c2.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("the waiting client read %d bytes (%v), want its end", n, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still waiting 10 s after its listener closed")
	}
}

// TestEdgeConnectionSlotsComeBack: every way a client connection ends
// gives its slot back: the client leaving after a request or before
// any, a request with Connection: close, a head over the limit (431 and
// a lingering close), a TLS handshake for no site of the node, an
// HTTP/2 connection. Each kind runs three times the cap, so a slot lost
// on any of them would leave the next connections unserved; at the end
// no slot is held.
func TestEdgeConnectionSlotsComeBack(t *testing.T) {
	addr, _ := scriptedUpstream(t, map[string]string{"/x": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"})
	const maxConns = 4
	e := newTestH2Edge(t, map[string]string{"cap.p2p": addr}, Deps{MaxConns: maxConns})
	edge, edgeTLS := e.s.Addrs()
	slots := e.s.ln.(betweenWrites).slots
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", edge.String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	// answer sends req on a new connection and reads the answer's status
	// line; with wholly, the rest until the connection's end.
	answer := func(req string, wholly bool) string {
		t.Helper()
		c := dial()
		defer c.Close()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		status, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("%.40q: %v", req, err)
		}
		if wholly {
			if _, err := io.Copy(io.Discard, br); err != nil {
				t.Fatalf("%.40q: %v", req, err)
			}
		}
		return strings.TrimSpace(status)
	}
	kinds := map[string]func(){
		"a request, then the client leaves": func() {
			if st := answer("GET /x HTTP/1.1\r\nHost: cap.p2p\r\n\r\n", false); st != "HTTP/1.1 200 OK" {
				t.Fatal(st)
			}
		},
		"no request": func() { dial().Close() },
		"Connection: close": func() {
			if st := answer("GET /x HTTP/1.1\r\nHost: cap.p2p\r\nConnection: close\r\n\r\n", true); st != "HTTP/1.1 200 OK" {
				t.Fatal(st)
			}
		},
		"a head over the limit": func() {
			big := "GET /x HTTP/1.1\r\nHost: cap.p2p\r\nX-Pad: " + strings.Repeat("p", MaxHeaderBytes) + "\r\n\r\n"
			if st := answer(big, true); !strings.Contains(st, " 431 ") {
				t.Fatal(st)
			}
		},
		"a handshake for no site here": func() {
			c, err := tls.Dial("tcp", edgeTLS.String(), &tls.Config{InsecureSkipVerify: true, ServerName: "nowhere.p2p"})
			if err == nil {
				c.Close()
				t.Fatal("handshake for an unknown name succeeded")
			}
		},
		"HTTP/2": func() {
			resp, err := e.c.Get("https://cap.p2p/x")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
				t.Fatalf("%s %s", resp.Proto, resp.Status)
			}
			e.c.CloseIdleConnections()
		},
	}
	for name, run := range kinds {
		for range 3 * maxConns {
			run()
		}
		t.Logf("%s: %d slots held", name, slots.lim.Held())
	}
	deadline := time.Now().Add(10 * time.Second)
	for slots.lim.Held() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d slots still held 10 s after the last connection ended", slots.lim.Held())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEdgeAddressShare: one client address holds at most its share of
// the cap (2 of 8 by default here, 3 when set; loopback counted for the
// test); its next connection is closed unanswered, while another
// address is served; once one of its connections ends it is served
// again.
func TestEdgeAddressShare(t *testing.T) {
	addr, _ := scriptedUpstream(t, map[string]string{"/x": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"})
	for _, c := range []struct {
		perAddr, share int
	}{{0, 2}, {3, 3}} {
		t.Run(fmt.Sprintf("share %d", c.share), func(t *testing.T) {
			e := newTestH2Edge(t, map[string]string{"cap.p2p": addr}, Deps{MaxConns: 8, MaxConnsPerAddr: c.perAddr, countLoopback: true})
			edge, _ := e.s.Addrs()
			from := func(local string) (net.Conn, error) { return getFrom(t, edge, local) }
			var held []net.Conn
			for range c.share {
				conn, err := from("127.0.0.1")
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, conn)
			}
			if _, err := from("127.0.0.1"); err == nil {
				t.Fatalf("connection %d from one address was served; its share is %d", c.share+1, c.share)
			}
			if _, err := from("127.0.0.2"); err != nil {
				t.Fatalf("another address: %v", err)
			}
			held[0].Close()
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, err := from("127.0.0.1")
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("10 s after one of its connections closed, the address is still refused: %v", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if n := e.s.Counters().ConnsOverShare; n < 1 {
				t.Fatalf("refused %d connections, want at least 1", n)
			}
		})
	}
}

// getFrom asks edge (its plain HTTP address) for cap.p2p's /x over a
// connection from the local address, and leaves the connection open
// (closed when the test ends); an error when it is not answered within
// 10 s.
func getFrom(t *testing.T, edge net.Addr, local string) (net.Conn, error) {
	return getFromWithin(t, edge, local, 10*time.Second)
}

// getFromWithin is getFrom with the answer's deadline.
func getFromWithin(t *testing.T, edge net.Addr, local string, within time.Duration) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", edge.String())
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(within))
	if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: cap.p2p\r\n\r\n"); err != nil {
		return c, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return c, err
	}
	resp.Body.Close()
	return c, nil
}
