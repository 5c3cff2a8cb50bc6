// Command bare is the smallest fasthttp reverse proxy (HostClient.Do on
// the server's own request and response, nothing else): the floor the
// edge proxy is compared with in bench/proxy/compare.sh.
package main

import (
	"flag"
	"log"

	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	backend := flag.String("backend", "", "backend host:port")
	flag.Parse()
	c := &fasthttp.HostClient{Addr: *backend, MaxConns: 1024}
	h := func(ctx *fasthttp.RequestCtx) {
		if err := c.Do(&ctx.Request, &ctx.Response); err != nil {
			ctx.Error(err.Error(), fasthttp.StatusBadGateway)
		}
	}
	log.Fatal(fasthttp.ListenAndServe(*listen, h))
}
