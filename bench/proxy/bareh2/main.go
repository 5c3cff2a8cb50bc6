// Command bareh2 is the smallest HTTP/2 reverse proxy on the libraries
// the edge's HTTP/2 is built from: net/http's server (TLS, ALPN h2) and a
// fasthttp HostClient to an HTTP/1.1 backend, its handler copying the
// request's method, target and headers out and the answer's status,
// headers and body back, nothing else. It is the floor the edge's
// HTTP/2 is compared with in bench/proxy/h2.sh, as bench/proxy/bare is
// for HTTP/1.1: what the edge spends beyond it is its own; what this
// spends beyond nginx's HTTP/2 proxy is the libraries'.
package main

import (
	"crypto/tls"
	"flag"
	"io"
	"log"
	"net/http"

	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	backend := flag.String("backend", "", "backend host:port")
	certFile := flag.String("cert", "", "TLS certificate (PEM)")
	keyFile := flag.String("key", "", "TLS key (PEM)")
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
	srv := &http.Server{
		Addr:      *listen,
		Handler:   http.HandlerFunc(h),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}},
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	log.Fatal(srv.ListenAndServeTLS("", ""))
}
