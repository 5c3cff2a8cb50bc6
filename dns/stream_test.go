package dns

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"peerdns/messages"
)

// selfSigned is a TLS config for DoT tests (the client skips checks).
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dot.test"},
		DNSNames: []string{"dot.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

func framedQuery(t *testing.T, name string, qtype uint16, id uint16) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = id
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)
}

// readAnswers reads n length-prefixed answers; it returns their ids.
func readAnswers(t *testing.T, c net.Conn, n int) []uint16 {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ids []uint16
	var l [2]byte
	for len(ids) < n {
		if _, err := io.ReadFull(c, l[:]); err != nil {
			t.Fatalf("after %d of %d answers: %v", len(ids), n, err)
		}
		b := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatalf("after %d of %d answers: %v", len(ids), n, err)
		}
		ids = append(ids, binary.BigEndian.Uint16(b))
	}
	return ids
}

func dialStream(t *testing.T, network, addr string) net.Conn {
	t.Helper()
	var c net.Conn
	var err error
	if network == "tls" {
		c, err = tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"dot"}})
	} else {
		c, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A client may pipeline any number of queries on one connection (RFC
// 7766 §6.2.1.1). miekg/dns's default closed the connection after 128
// queries; with the rest unread, the close was a reset that also threw
// away answers already sent (a client pipelining 300 got 34).
func TestStreamPipelineBeyond128(t *testing.T) {
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	if err := s.ServeTLS("127.0.0.1:0", selfSigned(t)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ network, addr string }{{"tcp", s.Addr()}, {"tls", s.TLSAddr()}} {
		t.Run(tc.network, func(t *testing.T) {
			c := dialStream(t, tc.network, tc.addr)
			const n = 300
			var all []byte
			for i := 0; i < n; i++ {
				all = append(all, framedQuery(t, "a.local.", dns.TypeA, uint16(i))...)
			}
			if _, err := c.Write(all); err != nil {
				t.Fatal(err)
			}
			ids := readAnswers(t, c, n)
			seen := map[uint16]bool{}
			for _, id := range ids {
				if id >= n || seen[id] {
					t.Fatalf("answer id %d: not asked, or twice", id)
				}
				seen[id] = true
			}
		})
	}
}

// Pipelined queries are answered as each is ready (RFC 7766 §6.2.1.1):
// a local name asked behind two that wait for a silent upstream is
// answered at once, not after their timeouts; theirs follow.
func TestStreamAnswersPipelinedQueriesOutOfOrder(t *testing.T) {
	pub, local := testSources(t)
	const upTimeout = 3 * time.Second
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}, UpstreamTimeout: upTimeout}}, pub, local)
	if err := s.ServeTLS("127.0.0.1:0", selfSigned(t)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ network, addr string }{{"tcp", s.Addr()}, {"tls", s.TLSAddr()}} {
		t.Run(tc.network, func(t *testing.T) {
			c := dialStream(t, tc.network, tc.addr)
			all := append(framedQuery(t, "slow-one-"+tc.network+".example.", dns.TypeA, 1), framedQuery(t, "slow-two-"+tc.network+".example.", dns.TypeA, 2)...)
			all = append(all, framedQuery(t, "a.local.", dns.TypeA, 3)...)
			start := time.Now()
			if _, err := c.Write(all); err != nil {
				t.Fatal(err)
			}
			first := readAnswers(t, c, 1)
			if first[0] != 3 || time.Since(start) >= upTimeout {
				t.Fatalf("first answer: id %d after %v; want the local one (3) before the upstream's %v", first[0], time.Since(start), upTimeout)
			}
			if rest := readAnswers(t, c, 2); !(rest[0] == 1 && rest[1] == 2 || rest[0] == 2 && rest[1] == 1) {
				t.Fatalf("then %v, want the two upstream ones", rest)
			}
		})
	}
}

// A client that pipelines queries and reads no answer is disconnected
// after StreamWriteTimeout: miekg/dns set no write deadline, so the
// connection's goroutine waited in Write, past the idle timeout, for as
// long as the client kept the connection open.
func TestStreamClientThatNeverReads(t *testing.T) {
	pub, local := testSources(t)
	snap := local.Load()
	recs := append([]messages.LocalRecord(nil), snap.Records...)
	for i := 0; i < 9; i++ {
		recs = append(recs, mustRecord(t, `{"name":"big.local","type":"TXT","ttl":60,"data":"`+string(rune('a'+i))+strings.Repeat("x", 3990)+`"}`))
	}
	next := *snap
	next.Version++
	next.Records = recs
	local.Store(&next)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}, StreamWriteTimeout: 200 * time.Millisecond}}, pub, local)
	if err := s.ServeTLS("127.0.0.1:0", selfSigned(t)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		network, addr string
		ln            func() *streamListener
	}{
		{"tcp", s.Addr(), func() *streamListener { return s.tcpListener }},
		{"tls", s.TLSAddr(), func() *streamListener { return s.dotListener }},
	} {
		t.Run(tc.network, func(t *testing.T) {
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			}}
			raw, err := d.Dial("tcp", tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			c := raw
			if tc.network == "tls" {
				tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"dot"}})
				if err := tc.Handshake(); err != nil {
					t.Fatal(err)
				}
				c = tc
			}
			var all []byte
			for i := 0; i < 1000; i++ { // 36 MB of answers: more than any socket buffer
				all = append(all, framedQuery(t, "big.local.", dns.TypeTXT, uint16(i))...)
			}
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(all); err != nil {
				t.Fatal(err)
			}
			l := tc.ln()
			deadline := time.Now().Add(10 * time.Second)
			for l.lim.Held() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the server still holds %d connection(s) of a client that reads nothing", l.lim.Held())
				}
				time.Sleep(10 * time.Millisecond) // polling
			}
		})
	}
}

// Connections over MaxStreamConns are closed at once; a slot given back
// is taken again.
func TestStreamConnCap(t *testing.T) {
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}, MaxStreamConns: 3}}, pub, local)
	var held []net.Conn
	for i := 0; i < 3; i++ {
		c := dialStream(t, "tcp", s.Addr())
		c.Write(framedQuery(t, "a.local.", dns.TypeA, 1))
		readAnswers(t, c, 1)
		held = append(held, c)
	}
	over := dialStream(t, "tcp", s.Addr())
	over.Write(framedQuery(t, "a.local.", dns.TypeA, 1))
	over.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := over.Read(make([]byte, 1)); err == nil || errors.Is(err, syscall.ETIMEDOUT) || isTimeout(err) {
		t.Fatalf("a connection over the cap: read %v, want it closed", err)
	}
	if n := s.Stats().StreamConnsRefused; n != 1 {
		t.Fatalf("StreamConnsRefused = %d, want 1", n)
	}
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dialStream(t, "tcp", s.Addr())
		c.Write(framedQuery(t, "a.local.", dns.TypeA, 7))
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slot of a closed connection was not given back")
		}
	}
}

// One client address holds at most its share of MaxStreamConns (2 of 8
// by default, 3 when MaxStreamConnsPerAddr says so; loopback counted for
// the test): its next connection is closed at once while another
// address is served, and once one of its connections ends it is served
// again.
func TestStreamAddressShare(t *testing.T) {
	for _, c := range []struct{ perAddr, share int }{{0, 2}, {3, 3}} {
		t.Run(fmt.Sprintf("share %d", c.share), func(t *testing.T) {
			pub, local := testSources(t)
			cfg := Config{Upstreams: []string{deadUpstream(t)}, MaxStreamConns: 8, MaxStreamConnsPerAddr: c.perAddr, countLoopback: true}
			s := newTestServer(t, testConfig{Config: cfg}, pub, local)
			id := uint16(0)
			from := func(ip string) (net.Conn, error) {
				id++
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
				c, err := d.Dial("tcp", s.Addr())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				c.Write(framedQuery(t, "a.local.", dns.TypeA, id))
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				var l [2]byte
				_, err = io.ReadFull(c, l[:])
				if isTimeout(err) {
					t.Fatalf("from %s: no answer and no close in 5 s", ip)
				}
				return c, err
			}
			first, err := from("127.0.0.1")
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < c.share; i++ {
				if _, err := from("127.0.0.1"); err != nil {
					t.Fatalf("connection %d of a share of %d: %v", i+1, c.share, err)
				}
			}
			if _, err := from("127.0.0.1"); err == nil {
				t.Fatalf("connection %d from one address was answered; its share is %d", c.share+1, c.share)
			}
			if _, err := from("127.0.0.2"); err != nil {
				t.Fatalf("another address: %v", err)
			}
			st := s.Stats()
			if st.StreamConnsOverShare != 1 || st.StreamConnsRefused != 0 {
				t.Fatalf("over share %d, over the cap %d; want 1 and 0", st.StreamConnsOverShare, st.StreamConnsRefused)
			}
			first.Close()
			deadline := time.Now().Add(5 * time.Second)
			for {
				if _, err := from("127.0.0.1"); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("5 s after one of its connections closed, the address is still refused")
				}
				time.Sleep(10 * time.Millisecond) // polling
			}
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// tempErrListener fails Accept with EMFILE a few times.
type tempErrListener struct {
	net.Listener
	fails, calls int
}

func (l *tempErrListener) Accept() (net.Conn, error) {
	l.calls++
	if l.calls <= l.fails {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return l.Listener.Accept()
}

// Out of descriptors, Accept backs off instead of retrying at once
// (miekg/dns retries a temporary error in a loop: a CPU spun for as long
// as the descriptors were exhausted).
func TestStreamAcceptBacksOff(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	fl := &tempErrListener{Listener: inner, fails: 4}
	l := newStreamListener(fl, &Config{MaxStreamConns: 8, StreamWriteTimeout: time.Second})
	go func() {
		if c, err := net.Dial("tcp", inner.Addr().String()); err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	start := time.Now()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if el := time.Since(start); el < 5*time.Millisecond*(1+2+4+8) {
		t.Fatalf("4 EMFILE errors retried within %v: no back-off", el)
	}
	if fl.calls != 5 {
		t.Fatalf("Accept called %d times, want 5", fl.calls)
	}
}

// A DoT query that carries the EDNS(0) Padding option gets an answer
// padded to a multiple of 468 bytes (RFC 7830 §3, RFC 8467 §4.1), as
// unbound and Knot pad theirs; plain TCP and unpadded queries are
// answered as they are.
func TestDoTPadsPaddedQueries(t *testing.T) {
	pub, local := testSources(t)
	s := newTestServer(t, testConfig{Config: Config{Upstreams: []string{deadUpstream(t)}}}, pub, local)
	if err := s.ServeTLS("127.0.0.1:0", selfSigned(t)); err != nil {
		t.Fatal(err)
	}
	exchange := func(network, addr string, pad bool) (*dns.Msg, int) {
		t.Helper()
		q := new(dns.Msg)
		q.SetQuestion("a.local.", dns.TypeA)
		q.SetEdns0(1232, false)
		if pad {
			o := q.IsEdns0()
			o.Option = append(o.Option, &dns.EDNS0_PADDING{Padding: make([]byte, 20)})
		}
		b, err := q.Pack()
		if err != nil {
			t.Fatal(err)
		}
		c := dialStream(t, network, addr)
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			t.Fatal(err)
		}
		reply := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, reply); err != nil {
			t.Fatal(err)
		}
		m := new(dns.Msg)
		if err := m.Unpack(reply); err != nil {
			t.Fatalf("%s: %v", network, err)
		}
		return m, len(reply)
	}
	hasPadding := func(m *dns.Msg) bool {
		if o := m.IsEdns0(); o != nil {
			for _, opt := range o.Option {
				if opt.Option() == dns.EDNS0PADDING {
					return true
				}
			}
		}
		return false
	}
	m, n := exchange("tls", s.TLSAddr(), true)
	if n%468 != 0 || !hasPadding(m) || len(m.Answer) != 2 {
		t.Fatalf("DoT padded query: %d bytes, padding %v, %d answers; want a multiple of 468 with the option and both A records", n, hasPadding(m), len(m.Answer))
	}
	if m, n := exchange("tls", s.TLSAddr(), false); hasPadding(m) || n%468 == 0 {
		t.Fatalf("DoT unpadded query: %d bytes, padding %v; want no padding", n, hasPadding(m))
	}
	if m, _ := exchange("tcp", s.Addr(), true); hasPadding(m) {
		t.Fatal("plain TCP answer padded; padding is for encrypted transports")
	}
}
