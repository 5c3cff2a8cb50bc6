package doh

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestDecodeParam(t *testing.T) {
	q := []byte{0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'w', 'w', 'w', 0, 0, 1, 0, 1}
	for _, tt := range []struct {
		name, in string
		ok       bool
	}{
		{"raw url", base64.RawURLEncoding.EncodeToString(q), true},
		{"padded", base64.URLEncoding.EncodeToString(q[:20]), true},
		{"std alphabet", "ab+c", false},
		{"slash", "ab/c", false},
		{"bang", "abc!", false},
		{"only padding", "==", false},
		{"one char", "A", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeParam([]byte(tt.in))
			if (err == nil) != tt.ok {
				t.Fatalf("DecodeParam(%q) err = %v, want ok %v", tt.in, err, tt.ok)
			}
			if tt.ok && !bytes.HasPrefix(q, got) {
				t.Fatalf("DecodeParam(%q) = %x", tt.in, got)
			}
		})
	}
}

func ctxFor(method, contentType, dnsParam string, body []byte) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI("/dns-query")
	if dnsParam != "" {
		ctx.Request.URI().QueryArgs().Set("dns", dnsParam)
	}
	if contentType != "" {
		ctx.Request.Header.SetContentType(contentType)
	}
	ctx.Request.SetBody(body)
	return &ctx
}

func TestDecodeStatuses(t *testing.T) {
	q := []byte("0123456789abcdef")
	for _, tt := range []struct {
		name, method, ct, param string
		body                    []byte
		want                    int
	}{
		{"GET", "GET", "", base64.RawURLEncoding.EncodeToString(q), nil, 0},
		{"GET missing", "GET", "", "", nil, 400},
		{"GET bad", "GET", "", "%%%", nil, 400},
		{"GET too long", "GET", "", string(bytes.Repeat([]byte("A"), 87382)), nil, 414},
		{"POST", "POST", "application/dns-message", "", q, 0},
		{"POST with params", "POST", "application/dns-message; charset=x", "", q, 0},
		{"POST json", "POST", "application/json", "", q, 415},
		{"POST empty", "POST", "application/dns-message", "", nil, 400},
		{"POST 64 KiB", "POST", "application/dns-message", "", make([]byte, 65536), 413},
		{"DELETE", "DELETE", "", "", nil, 405},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, status, msg := Decode(ctxFor(tt.method, tt.ct, tt.param, tt.body))
			if status != tt.want {
				t.Fatalf("Decode status = %d (%s), want %d", status, msg, tt.want)
			}
			if status == 0 && !bytes.Equal(got, q) {
				t.Fatalf("Decode = %q, want %q", got, q)
			}
			if status != 0 && msg == "" {
				t.Fatal("no message with the error status")
			}
		})
	}
}

// FuzzDecode: no input panics; a decoded GET parameter re-encodes to
// the same bytes; a status always comes with a message.
func FuzzDecode(f *testing.F) {
	f.Add("GET", "", base64.RawURLEncoding.EncodeToString([]byte("abcdefghijklmnop")), []byte(nil))
	f.Add("GET", "", "ab+c", []byte(nil))
	f.Add("GET", "", "AAAA====", []byte(nil))
	f.Add("POST", "application/dns-message", "", []byte("abcdefghijklmnop"))
	f.Add("POST", "application/dns-message;;", "", []byte{0})
	f.Add("POST", "text/plain", "", []byte("x"))
	f.Fuzz(func(t *testing.T, method, ct, param string, body []byte) {
		q, status, msg := Decode(ctxFor(method, ct, param, body))
		if status != 0 {
			if msg == "" || q != nil {
				t.Fatalf("status %d with msg %q, query %x", status, msg, q)
			}
			return
		}
		if len(q) == 0 || len(q) > MaxMessage {
			t.Fatalf("accepted a query of %d bytes", len(q))
		}
		if d, err := DecodeParam([]byte(param)); err == nil {
			again, err := DecodeParam([]byte(base64.RawURLEncoding.EncodeToString(d)))
			if err != nil || !bytes.Equal(again, d) {
				t.Fatalf("re-encoded %x decodes to %x, %v", d, again, err)
			}
		}
	})
}
