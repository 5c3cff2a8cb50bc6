package h2srv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"peerdns/internal/testutil"
)

// testCert is a self-signed certificate for 127.0.0.1 and localhost.
var testCert = sync.OnceValues(func() (tls.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "h2srv test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
})

// testServer is a Server behind a TLS listener on 127.0.0.1 offering
// ALPN h2.
type testServer struct {
	srv  *Server
	addr string
	errs chan error // ServeConn's results
}

func newTestServer(t testing.TB, cfg Config, h http.Handler) *testServer {
	t.Helper()
	return newTestServerOn(t, cfg, h, nil)
}

// newTestServerOn is newTestServer with accepted, when not nil, called
// on each accepted connection before its TLS handshake.
func newTestServerOn(t testing.TB, cfg Config, h http.Handler, accepted func(net.Conn)) *testServer {
	t.Helper()
	if _, ok := t.(*testing.T); ok {
		// Every goroutine the server started (readers, writers, parked
		// handlers) is gone once the test's cleanups ran.
		testutil.NoLeaks(t)
	}
	cert, _ := testCert()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{srv: New(cfg), addr: ln.Addr().String(), errs: make(chan error, 1000)}
	tcfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if accepted != nil {
					accepted(c)
				}
				tc := tls.Server(c, tcfg)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := tc.HandshakeContext(ctx)
				cancel()
				if err != nil {
					_ = c.Close()
					return
				}
				err = ts.srv.ServeConn(context.Background(), tc, h)
				select {
				case ts.errs <- err:
				default:
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		_ = ts.srv.Close()
		wg.Wait()
	})
	return ts
}

func (ts *testServer) url(path string) string { return "https://" + ts.addr + path }

func clientTLS() *tls.Config {
	_, pool := testCert()
	return &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}, ServerName: "localhost"}
}

// testClients are the two Go HTTP/2 clients: x/net's Transport and
// net/http's with ForceAttemptHTTP2.
func testClients(t testing.TB) map[string]*http.Client {
	t.Helper()
	//lint:ignore SA1019 x/net's Transport is the second client the server must serve
	xt := &http2.Transport{TLSClientConfig: clientTLS()}
	st := &http.Transport{TLSClientConfig: clientTLS(), ForceAttemptHTTP2: true, ExpectContinueTimeout: 5 * time.Second}
	t.Cleanup(func() {
		//lint:ignore SA1019 x/net's Transport, as above
		xt.CloseIdleConnections()
		st.CloseIdleConnections()
	})
	return map[string]*http.Client{
		"x/net":    {Transport: xt, Timeout: 30 * time.Second},
		"net/http": {Transport: st, Timeout: 30 * time.Second},
	}
}

func tlsDial(addr string) (*tls.Conn, error) { return tls.Dial("tcp", addr, clientTLS()) }
