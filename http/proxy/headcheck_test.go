package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http/httpguts"
)

// FuzzUnfitHead: any head fasthttp reads is checked without a panic; one
// let through is HTTP/1.0 or HTTP/1.1, every field name of it as it came
// is a token, a Transfer-Encoding is chunked alone, its Host carries no
// user information, and a target of * is an OPTIONS one.
func FuzzUnfitHead(f *testing.F) {
	f.Add("GET / HTTP/1.1\r\nHost: a.p2p\r\nX-A: 1\r\n\r\n")
	f.Add("GET / HTTP/2.0\r\nHost: a.p2p\r\n\r\n")
	f.Add("GET / HTTP/1.7\r\nHost: a.p2p\r\n\r\n")
	f.Add("GET /\r\nHost: a.p2p\r\n\r\n")
	f.Add("GET / HTTP/1.1\r\nHost: a.p2p\r\nX A: b\r\nX-B: c\r\n d\r\n\r\n")
	f.Add("GET http://u:p@a.p2p/x?y=@ HTTP/1.1\r\nHost: a.p2p\r\n\r\n")
	f.Add("GET / HTTP/1.0\r\nHost: u@a.p2p\r\n\r\n")
	f.Add("POST / HTTP/1.1\r\nHost: a.p2p\r\nTransfer-Encoding: identity\r\n\r\n")
	f.Add("GET * HTTP/1.1\r\nHost: a.p2p\r\n\r\n")
	f.Add("GET / HTTP/1.1\r\nHost: a.p2p\r\nConnection: " + strings.Repeat("a,", maxNominees) + "\r\nConnection: b\r\n\r\n")
	f.Fuzz(func(t *testing.T, raw string) {
		var h fasthttp.RequestHeader
		if err := h.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
			return
		}
		if st, _ := unfitHead(&h, namesOf(&h)); st != 0 {
			return
		}
		if p := string(h.Protocol()); p != "HTTP/1.1" && p != "HTTP/1.0" {
			t.Fatalf("%q let through as %s", raw, p)
		}
		if bytes.IndexByte(h.Host(), '@') >= 0 {
			t.Fatalf("%q let through with Host %q", raw, h.Host())
		}
		if string(h.RequestURI()) == "*" && !h.IsOptions() {
			t.Fatalf("%q let through: * with %s", raw, h.Method())
		}
		nominees := 0
		for name, value := range rawFields(h.RawHeaders()) {
			if strings.EqualFold(string(name), "Connection") {
				for tok := range strings.SplitSeq(string(value), ",") {
					if strings.Trim(tok, " \t\r\n") != "" {
						nominees++
					}
				}
			}
			if strings.EqualFold(string(name), "Transfer-Encoding") && !strings.EqualFold(string(value), "chunked") {
				t.Fatalf("%q let through with Transfer-Encoding %q", raw, value)
			}
			for _, c := range name {
				if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) && !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
					t.Fatalf("%q let through with the field name %q", raw, name)
				}
			}
		}
		if nominees > maxNominees {
			t.Fatalf("%q let through naming %d fields in Connection", raw, nominees)
		}
	})
}

// FuzzUnfitTarget: an HTTP/2 or HTTP/3 :method and :path the edge lets
// through, written into an HTTP/1.1 request line, read back (by
// fasthttp, as an upstream's server would) as the same method and
// target.
func FuzzUnfitTarget(f *testing.F) {
	f.Add("GET", "/a?b=c")
	f.Add("GET", "/a b")
	f.Add("GET", "/a?x= HTTP/1.1")
	f.Add("OPTIONS", "*")
	f.Add("GET x", "/")
	f.Add("POST", "http://other/x")
	f.Add("GET", "/caf\xc3\xa9#f")
	f.Fuzz(func(t *testing.T, method, path string) {
		r := &http.Request{Method: method, RequestURI: path}
		if st, _ := unfitTarget(r); st != 0 || method == http.MethodConnect {
			return
		}
		var h fasthttp.RequestHeader
		line := method + " " + path + " HTTP/1.1\r\nHost: a.p2p\r\n\r\n"
		if err := h.Read(bufio.NewReaderSize(strings.NewReader(line), len(line))); err != nil {
			t.Fatalf("%q %q let through; the line does not read: %.200v", method, path, err)
		}
		if string(h.Method()) != method || string(h.RequestURI()) != path {
			t.Fatalf("%.100q %.100q let through; the line reads back as %.100q %.100q", method, path, h.Method(), h.RequestURI())
		}
	})
}

// A field value headerList finds unpadded (and the HTTP/2 and HTTP/3
// libraries take: no control bytes) reads back from the HTTP/1.1 head
// the edge writes upstream as the same value.
func FuzzPaddedValue(f *testing.F) {
	f.Add("v")
	f.Add(" v")
	f.Add("v\t")
	f.Add("a \t b")
	f.Add("caf\xc3\xa9")
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		r := &http.Request{Header: http.Header{"X-V": {v}}}
		if _, padded := headerList(r); padded || !httpguts.ValidHeaderFieldValue(v) {
			return
		}
		var h fasthttp.RequestHeader
		head := "GET / HTTP/1.1\r\nHost: a.p2p\r\nX-V: " + v + "\r\n\r\n"
		if err := h.Read(bufio.NewReaderSize(strings.NewReader(head), len(head))); err != nil {
			t.Fatalf("%.100q let through; the head does not read: %.200v", v, err)
		}
		if got := string(h.Peek("X-V")); got != v {
			t.Fatalf("%.100q let through; it reads back as %.100q", v, got)
		}
	})
}

// validHost takes host names and IP literals in brackets, with or
// without a port of digits, and nothing else.
func TestValidHost(t *testing.T) {
	for _, h := range []string{"", "a.p2p", "A.P2P.", "x_1.a.p2p", "a.p2p:", "a.p2p:8080", "127.0.0.1:7780", "[::1]", "[::1]:80", "[::ffff:1.2.3.4]"} {
		if !validHost(h) {
			t.Errorf("%q refused", h)
		}
	}
	for _, h := range []string{"a,b.p2p", "a;b.p2p", "a b.p2p", "a/b.p2p", "a?b.p2p", "a#b.p2p", "a\\b.p2p", "a%2fb.p2p", "u@a.p2p", "a<b>.p2p",
		"a.p2p:8x", "a.p2p:1:2", "[::1]x.p2p", "[::1", "[::1]:8x", "[::1%eth0]", "a.p2p\x00", "\xc3\xa9.p2p"} {
		if validHost(h) {
			t.Errorf("%q taken", h)
		}
	}
}

// A field is folded when its value goes on over a next line, whether
// the fold comes right after the colon or inside the value; an empty
// value followed by the next field is not.
func TestFoldedField(t *testing.T) {
	raw := "Content-Length:\r\nX-A: 1\r\nHost:\r\n a\r\nX-B: 2\r\n\t3\r\nX-C: 4\r\nX-D:\r\n"
	var got []string
	for name, value := range rawFields([]byte(raw)) {
		got = append(got, fmt.Sprintf("%s=%v", name, foldedField(name, value)))
	}
	if want := "[Content-Length=false X-A=false Host=true X-B=true X-C=false X-D=false]"; fmt.Sprint(got) != want {
		t.Fatalf("%v, want %s", got, want)
	}
}
