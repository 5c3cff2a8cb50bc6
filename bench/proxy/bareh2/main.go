// Command bareh2 is the smallest HTTP/2 reverse proxy on the libraries
// the edge's HTTP/2 is built from: the HTTP/2 server http/h2srv over
// crypto/tls (ALPN h2) and a fasthttp HostClient to an HTTP/1.1 backend,
// its handler copying the request's method, target and headers out and
// the answer's status, headers and body back, nothing else. It is the
// floor the edge's HTTP/2 is compared with in bench/proxy/h2.sh, as
// bench/proxy/bare is for HTTP/1.1: what the edge spends beyond it is its
// own; what this spends beyond nginx's HTTP/2 proxy is the libraries'.
// With -server net/http the same handler runs on net/http's HTTP/2
// server instead, the server the edge was built on before h2srv.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"io"
	"log"
	"net/http"

	"github.com/valyala/fasthttp"

	"peerdns/http/h2srv"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	backend := flag.String("backend", "", "backend host:port")
	certFile := flag.String("cert", "", "TLS certificate (PEM)")
	keyFile := flag.String("key", "", "TLS key (PEM)")
	server := flag.String("server", "h2srv", "HTTP/2 server: h2srv or net/http")
	flag.Parse()
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		log.Fatal(err)
	}
	c := &fasthttp.HostClient{Addr: *backend, MaxConns: 1024}
	h := func(w http.ResponseWriter, r *http.Request) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.Header.SetMethod(r.Method)
		req.SetRequestURI(r.URL.RequestURI())
		req.Header.SetHost(r.Host)
		for k, vs := range r.Header {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		if r.ContentLength != 0 {
			req.SetBodyStream(r.Body, int(r.ContentLength))
		}
		if err := c.Do(req, resp); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for k, v := range resp.Header.All() {
			w.Header().Add(string(k), string(v))
		}
		w.WriteHeader(resp.StatusCode())
		_, _ = w.Write(resp.Body())
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}}
	switch *server {
	case "net/http":
		srv := &http.Server{
			Addr:      *listen,
			Handler:   http.HandlerFunc(h),
			TLSConfig: conf,
			ErrorLog:  log.New(io.Discard, "", 0),
		}
		log.Fatal(srv.ListenAndServeTLS("", ""))
	case "h2srv":
		log.Fatal(serveH2srv(*listen, conf, http.HandlerFunc(h)))
	default:
		log.Fatalf("-server %q: h2srv or net/http", *server)
	}
}

// serveH2srv accepts TLS connections on addr and serves those that
// negotiated h2 with an h2srv.Server on its defaults.
func serveH2srv(addr string, conf *tls.Config, h http.Handler) error {
	ln, err := tls.Listen("tcp", addr, conf)
	if err != nil {
		return err
	}
	srv := h2srv.New(h2srv.Config{})
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			tc := c.(*tls.Conn)
			if tc.HandshakeContext(context.Background()) != nil || tc.ConnectionState().NegotiatedProtocol != "h2" {
				return
			}
			_ = srv.ServeConn(context.Background(), tc, h)
		}()
	}
}
