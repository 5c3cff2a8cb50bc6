package proxy

import (
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/valyala/fasthttp"
)

// A HEAD answer names no Content-Length but the one its GET would
// carry (RFC 9110 §8.6), over each protocol: for an in-process route
// (DoH's, on the admin domain) and for an upstream's answer of unknown
// length. quic-go's HTTP/3 server sends the count of bytes written,
// none for a HEAD the handler wrote no body to, when no length is set.
func TestHeadAnswerLength(t *testing.T) {
	const body = "0123456789abcdef"
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, body[:8])
		w.(http.Flusher).Flush() // no length: chunked
		_, _ = io.WriteString(w, body[8:])
	})
	e := startTestEdge(t, map[string]string{"hd.p2p": up}, Deps{Admin: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/dns-message")
		ctx.SetBodyString(body)
	}})
	for _, host := range []string{"admin.p2p", "hd.p2p"} {
		clients := map[string]http.RoundTripper{"HTTP/2": e.c.Transport, "HTTP/3": e.h3(t, host)}
		for proto, rt := range clients {
			t.Run(host+" "+proto, func(t *testing.T) {
				req, _ := http.NewRequest(http.MethodHead, "https://"+host+"/dns-query?dns=AAAA", nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 || resp.Proto != proto+".0" {
					t.Fatalf("%s %d", resp.Proto, resp.StatusCode)
				}
				if cl, ok := resp.Header["Content-Length"]; ok && (len(cl) != 1 || cl[0] != strconv.Itoa(len(body))) {
					t.Fatalf("HEAD answered with Content-Length %q; its GET has %d bytes", cl, len(body))
				}
			})
		}
	}
}
