package doh_test

import (
	"bytes"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
	"github.com/valyala/fasthttp"

	nodedns "peerdns/dns"
	"peerdns/http/doh"
	"peerdns/internal/view"
)

// serveDoH serves doh.Handler over a DNS server that holds site.p2p on
// 127.0.0.1:0, and gives its /dns-query URL.
func serveDoH(t *testing.T) string {
	t.Helper()
	pub := &view.Published{}
	pub.Store(&view.Snapshot{Version: 1, Domains: map[string]*view.Domain{
		"site.p2p": {Name: "site.p2p", Status: "resolved", IP: netip.MustParseAddr("10.77.0.5")},
	}})
	s, err := nodedns.New(nodedns.Config{Addr: "127.0.0.1:0", ResolvConf: "/nonexistent"}, pub, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: doh.Handler(s)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return "http://" + ln.Addr().String() + doh.Path
}

// paddedQuery is a query for site.p2p padded to 128 bytes, as Firefox
// and Chromium send theirs (RFC 8467 §4.1); pad false leaves the
// Padding option out.
func paddedQuery(t *testing.T, pad bool) []byte {
	t.Helper()
	q := new(dns.Msg).SetQuestion("site.p2p.", dns.TypeA)
	q.Id = 0
	q.SetEdns0(1232, false)
	if pad {
		n := 128 - q.Len() - 4
		q.IsEdns0().Option = append(q.IsEdns0().Option, &dns.EDNS0_PADDING{Padding: make([]byte, n)})
	}
	b, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A query with the EDNS(0) Padding option gets a padded answer, a
// multiple of 468 bytes long (RFC 7830 §4: a responder must pad then;
// RFC 8467 §4.1 names the block), over GET and POST; one without the
// option gets none.
func TestPaddedQueryGetsPaddedAnswer(t *testing.T) {
	url := serveDoH(t)
	for _, tt := range []struct {
		name   string
		method string
		pad    bool
	}{
		{"POST padded", "POST", true},
		{"GET padded", "GET", true},
		{"POST unpadded", "POST", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := paddedQuery(t, tt.pad)
			var req *http.Request
			if tt.method == "GET" {
				req, _ = http.NewRequest("GET", url+"?dns="+base64.RawURLEncoding.EncodeToString(q), nil)
			} else {
				req, _ = http.NewRequest("POST", url, bytes.NewReader(q))
				req.Header.Set("Content-Type", doh.ContentType)
			}
			req.Header.Set("Accept", doh.ContentType)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d %q", resp.StatusCode, body)
			}
			m := new(dns.Msg)
			if err := m.Unpack(body); err != nil {
				t.Fatalf("answer does not unpack: %v", err)
			}
			if len(m.Answer) != 1 || m.Rcode != dns.RcodeSuccess {
				t.Fatalf("answer %v", m)
			}
			var padding *dns.EDNS0_PADDING
			if opt := m.IsEdns0(); opt != nil {
				for _, o := range opt.Option {
					if p, ok := o.(*dns.EDNS0_PADDING); ok {
						padding = p
					}
				}
			}
			if !tt.pad {
				if padding != nil {
					t.Fatalf("an unpadded query got padding (%d bytes)", len(padding.Padding))
				}
				return
			}
			if padding == nil {
				t.Fatalf("a padded query got an answer of %d bytes without padding", len(body))
			}
			if len(body)%468 != 0 {
				t.Fatalf("padded answer is %d bytes, not a multiple of 468", len(body))
			}
			if !bytes.Equal(padding.Padding, make([]byte, len(padding.Padding))) {
				t.Fatal("padding octets are not zero (RFC 7830 §3)")
			}
		})
	}
}
