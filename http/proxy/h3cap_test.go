package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"peerdns/internal/testutil"
)

// h3From asks e for cap.p2p's /x over HTTP/3 on a new QUIC connection
// from the local address, left open until the test ends; an error when
// it is not answered.
func h3From(t *testing.T, e *h2Edge, local string) error {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(local)})
	if err != nil {
		t.Fatal(err)
	}
	qt := &quic.Transport{Conn: pc}
	tr := e.h3Over(qt, "cap.p2p")
	t.Cleanup(func() {
		tr.Close()
		qt.Close()
		pc.Close()
	})
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := c.Get("https://cap.p2p/x")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	return err
}

// HTTP/3 connections count in the edge's cap with the TCP ones and in
// their address's share: one over its address's share, or over the cap,
// is closed at once (its client would go on over TCP), counted, and the
// next one is served once a place is free.
func TestEdgeHTTP3InTheCap(t *testing.T) {
	addr, _ := scriptedUpstream(t, map[string]string{"/x": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"})

	t.Run("share", func(t *testing.T) {
		e := startTestEdge(t, map[string]string{"cap.p2p": addr}, Deps{MaxConns: 8, countLoopback: true}) // a share of 2
		edge, _ := e.s.Addrs()
		if _, err := getFrom(t, edge, "127.0.0.1"); err != nil {
			t.Fatal(err)
		}
		if err := h3From(t, e, "127.0.0.1"); err != nil {
			t.Fatalf("HTTP/3 within the address's share: %v", err)
		}
		if err := h3From(t, e, "127.0.0.1"); err == nil {
			t.Fatal("a third connection from one address (one TCP, two QUIC) was served; its share is two")
		}
		if err := h3From(t, e, "127.0.0.2"); err != nil {
			t.Fatalf("HTTP/3 from another address: %v", err)
		}
		// (quic-go's client may dial once more after the first close.)
		if c := e.s.Counters(); c.ConnsOverShare < 1 || c.H3AtCap != 0 {
			t.Fatalf("over the share %d, at the cap %d; want at least 1 and 0", c.ConnsOverShare, c.H3AtCap)
		}
	})

	t.Run("cap", func(t *testing.T) {
		e := startTestEdge(t, map[string]string{"cap.p2p": addr}, Deps{MaxConns: 2, countLoopback: true})
		edge, _ := e.s.Addrs()
		first, err := getFrom(t, edge, "127.0.0.3")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := getFrom(t, edge, "127.0.0.4"); err != nil {
			t.Fatal(err)
		}
		if err := h3From(t, e, "127.0.0.5"); err == nil {
			t.Fatal("an HTTP/3 connection was served with the cap's two TCP connections open")
		}
		if c := e.s.Counters(); c.H3AtCap < 1 || c.ConnsOverShare != 0 {
			t.Fatalf("at the cap %d, over the share %d; want at least 1 and 0", c.H3AtCap, c.ConnsOverShare)
		}
		first.Close()
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := h3From(t, e, "127.0.0.5")
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("10 s after a TCP connection closed, HTTP/3 is still refused: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// The QUIC connection holds its slot: a TCP client now waits (an
		// answer would come in a millisecond; nothing to poll for).
		if _, err := getFromWithin(t, edge, "127.0.0.6", 300*time.Millisecond); err == nil {
			t.Fatal("a TCP connection was served while an HTTP/3 one held the last slot")
		}
	})
}

// h3Over is an HTTP/3 client of e's HTTPS port that asks for serverName
// and dials from qt's socket.
func (e *h2Edge) h3Over(qt *quic.Transport, serverName string) *http3.Transport {
	_, httpsAddr := e.s.Addrs()
	return &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: e.s.d.CA.Pool(), ServerName: serverName},
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			ua, err := net.ResolveUDPAddr("udp", httpsAddr.String())
			if err != nil {
				return nil, err
			}
			return qt.DialEarly(ctx, ua, tc, qc)
		},
	}
}

// mute is a client's UDP socket that reads nothing: the handshakes
// dialled over it never finish, as those of an Initial sent from a
// forged source address do not. got counts the packets it dropped.
type mute struct {
	net.PacketConn
	got atomic.Int64
}

// SetReadBuffer and SetWriteBuffer let quic-go size the socket's
// buffers (it logs a warning otherwise); ReadMsgUDP is left out, so
// that it reads through ReadFrom.
func (m *mute) SetReadBuffer(n int) error  { return m.PacketConn.(*net.UDPConn).SetReadBuffer(n) }
func (m *mute) SetWriteBuffer(n int) error { return m.PacketConn.(*net.UDPConn).SetWriteBuffer(n) }

func (m *mute) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		n, a, err := m.PacketConn.ReadFrom(p)
		if err != nil {
			return n, a, err
		}
		m.got.Add(1)
	}
}

// An HTTP/3 connection takes its place in the cap and in its address's
// share once its handshake has finished, as a TCP one does once
// accepted: Initial packets from an address that never answers (one
// anybody can forge) hold no place, and the address's own connections
// are served.
func TestEdgeHTTP3UnfinishedHandshakesHoldNoPlace(t *testing.T) {
	addr, _ := scriptedUpstream(t, map[string]string{"/x": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"})
	e := startTestEdge(t, map[string]string{"cap.p2p": addr}, Deps{MaxConns: 8, countLoopback: true}) // a share of 2
	edge, httpsAddr := e.s.Addrs()
	ua, err := net.ResolveUDPAddr("udp", httpsAddr.String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var mutes []*mute
	for range 2 {
		pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP("127.0.0.7")})
		if err != nil {
			t.Fatal(err)
		}
		m := &mute{PacketConn: pc}
		mutes = append(mutes, m)
		qt := &quic.Transport{Conn: m}
		t.Cleanup(func() { qt.Close(); pc.Close() })
		go func() {
			_, _ = qt.DialEarly(ctx, ua, &tls.Config{ServerName: "cap.p2p", InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}}, nil)
		}()
	}
	// The edge has read both ClientHellos once it has answered them.
	testutil.Eventually(t, 5*time.Second, func() error {
		for _, m := range mutes {
			if m.got.Load() == 0 {
				return io.ErrNoProgress
			}
		}
		return nil
	})
	// A connection that finishes its handshake after them, served.
	if err := h3From(t, e, "127.0.0.8"); err != nil {
		t.Fatal(err)
	}
	if n := e.s.Counters().H3Conns; n != 1 {
		t.Fatalf("%d HTTP/3 connections counted open; one finished its handshake", n)
	}
	if _, err := getFrom(t, edge, "127.0.0.7"); err != nil {
		t.Fatalf("a TCP connection from an address whose share unfinished QUIC handshakes fill: %v", err)
	}
}
