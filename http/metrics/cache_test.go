package metrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// The scrape cache answers a repeated scrape with the bytes of the
// first within its period, keeps gzip and plain apart, and keeps at most
// maxCachedScrapes answers whatever Accept headers clients send.
func TestScrapeCache(t *testing.T) {
	c := &scrapeCache{every: time.Hour}
	req := func(accept, enc string) *fasthttp.RequestCtx {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.Set("Accept", accept)
		if enc != "" {
			ctx.Request.Header.Set("Accept-Encoding", enc)
		}
		return &ctx
	}
	first := req("text/plain", "gzip")
	if c.serve(first) {
		t.Fatal("an empty cache served")
	}
	first.SetContentType("text/plain; version=0.0.4")
	first.Response.Header.Set("Content-Encoding", "gzip")
	first.SetBodyString("zipped")
	c.keep(first)
	again := req("text/plain", "gzip, deflate")
	if !c.serve(again) || string(again.Response.Body()) != "zipped" || string(again.Response.Header.Peek("Content-Encoding")) != "gzip" {
		t.Fatalf("repeat scrape: body %q, encoding %q", again.Response.Body(), again.Response.Header.Peek("Content-Encoding"))
	}
	if c.serve(req("text/plain", "")) {
		t.Fatal("a plain scrape was served the gzip answer")
	}
	for i := 0; i < 10; i++ {
		ctx := req(fmt.Sprint("application/x-", i), "")
		ctx.SetBodyString("x")
		c.keep(ctx)
	}
	if len(c.answers) != maxCachedScrapes {
		t.Fatalf("%d answers kept, want at most %d", len(c.answers), maxCachedScrapes)
	}
	failed := req("text/plain", "")
	failed.SetStatusCode(503)
	c = &scrapeCache{every: time.Hour}
	c.keep(failed)
	if c.serve(req("text/plain", "")) {
		t.Fatal("a 503 was kept")
	}
}

// HTTPS through the edge counts completed handshakes, and a handshake
// for a name the node serves no site for counts as no_certificate;
// /metrics answers over HTTPS by the admin domain too.
