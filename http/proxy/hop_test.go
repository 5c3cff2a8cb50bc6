package proxy

import (
	"bufio"
	"fmt"
	"iter"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"
)

// Every hop-by-hop header of a request goes, in whatever case it came,
// and so does every header its Connection headers name but Host and
// Content-Length; the others stay, the Cookie header byte for byte as
// the client sent it.
func TestDropHopRequest(t *testing.T) {
	var req fasthttp.Request
	raw := "GET / HTTP/1.1\r\nHost: a.p2p\r\nConnection: close\r\nKeep-Alive: timeout=5\r\nkeep-alive: x\r\nTE: trailers\r\n" +
		"Proxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\nTrailer: X-T\r\nX-Keep: 1\r\nCookie: b=2;a=1;junk\r\n" +
		"X-Hop-A: 1\r\nconnection: x-hop-a ,\tX-HOP-B, host, Content-Length\r\nX-Hop-B: 2\r\n\r\n"
	if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	dropHopRequest(&req.Header, namesOf(&req.Header).hop)
	head := req.Header.String()
	want := "GET / HTTP/1.1\r\nHost: a.p2p\r\nX-Keep: 1\r\nCookie: b=2;a=1;junk\r\n\r\n"
	if head != want && head != "GET / HTTP/1.1\r\nHost: a.p2p\r\nCookie: b=2;a=1;junk\r\nX-Keep: 1\r\n\r\n" {
		t.Fatalf("head %q, want %q (headers in either order)", head, want)
	}
	if req.Header.ConnectionClose() {
		t.Fatal("the client's Connection: close would reach the upstream")
	}
}

// An upstream's names are kept as they came (the pool does not
// normalize them): a lower-case hop-by-hop name goes too, and so do
// several spellings of one, and the headers its Connection header names
// but Content-Length.
func TestDropHopResponse(t *testing.T) {
	left := dropHopOf(t, true, "Content-Length: 2\r\nkeep-alive: timeout=5\r\nKeep-Alive: timeout=6\r\nKEEP-ALIVE: 7\r\n"+
		"proxy-authenticate: Basic\r\nConnection: keep-alive, X-Internal,content-length\r\ntrailer: X-T\r\nx-keep: 1\r\nx-internal: 1\r\n")
	if left != "Content-Length: 2, x-keep: 1" {
		t.Fatalf("headers left %q, want Content-Length and x-keep", left)
	}
}

// On the edge's own answers (fasthttp's default type on): the headers
// named in Connection go, every one of them, each deleted once although
// fasthttp yields a Content-Type of its own after a Del; Content-Type
// itself stays whatever Connection says.
func TestDropHopResponseNamesEach(t *testing.T) {
	left := dropHopOf(t, false, "Content-Length: 2\r\nConnection: content-type, server, date, set-cookie, x-a\r\n"+
		"Server: x\r\nDate: y\r\nContent-Type: text/html\r\nSet-Cookie: a=b\r\nx-a: 1\r\nX-B: 2\r\n")
	if left != "Content-Length: 2, Content-Type: text/html, X-B: 2" {
		t.Fatalf("headers left %q", left)
	}
}

// dropHopOf reads an upstream's answer with the header lines fields
// (names kept as they came, as the pool reads them; fasthttp's default
// Content-Type off when noDefaultType), drops its hop-by-hop headers,
// and gives the headers left, "name: value" joined by ", ".
func dropHopOf(t *testing.T, noDefaultType bool, fields string) string {
	t.Helper()
	var resp fasthttp.Response
	resp.Header.DisableNormalizing()
	resp.Header.SetNoDefaultContentType(noDefaultType)
	if err := resp.Read(bufio.NewReader(strings.NewReader("HTTP/1.1 200 OK\r\n" + fields + "\r\nok"))); err != nil {
		t.Fatal(err)
	}
	dropHopResponse(&resp.Header)
	var left []string
	for k, v := range resp.Header.All() {
		left = append(left, string(k)+": "+string(v))
	}
	return strings.Join(left, ", ")
}

// An answer without hop-by-hop headers, the common case, is walked once
// and nothing is allocated; nor is anything for a request's walks (its
// hop-by-hop names, its framing).
func TestDropHopAllocatesNothing(t *testing.T) {
	var resp fasthttp.Response
	resp.Header.Set("Server", "nginx")
	resp.Header.Set("Last-Modified", "Mon, 30 Nov 2026 10:00:00 GMT")
	if n := testing.AllocsPerRun(100, func() { dropHopResponse(&resp.Header) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
	var req fasthttp.Request
	if err := req.Read(bufio.NewReader(strings.NewReader("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nUser-Agent: x\r\n\r\nx"))); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		names := namesOf(&req.Header)
		dropHopRequest(&req.Header, names.hop)
		_ = names.bothFramings()
	}); n != 0 {
		t.Fatalf("request: %v allocations", n)
	}
}

func TestIsHopName(t *testing.T) {
	for _, h := range hopHeaders {
		for _, k := range []string{h, strings.ToLower(h), strings.ToUpper(h)} {
			if !isHopName(k) {
				t.Errorf("%q not taken for a hop-by-hop header", k)
			}
		}
	}
	for _, k := range []string{"", "T", "Tf", "Keep-Alivf", "Upgradf", "Content-Length", "Transfer-Encodings", "X-Connection"} {
		if isHopName(k) {
			t.Errorf("%q taken for a hop-by-hop header", k)
		}
	}
}

// Whatever head an upstream sends, no hop-by-hop header is left after
// the walk and every other header stays.
func FuzzDropHopResponse(f *testing.F) {
	f.Add("keep-alive: timeout=5\r\nX-A: 1")
	f.Add("Connection: close\r\nTrailer: X-T\r\nTE: trailers\r\nproxy-AUTHENTICATE: x")
	f.Add("Transfer-Encoding: chunked\r\nkeep-alive: 1\r\nKeep-Alive: 2\r\nKEEP-ALIVE: 3\r\nSet-Cookie: a=b")
	f.Add("x-a: 1\r\nConnection: X-A, content-length ,, keep-alive\r\nX-B: 2\r\nconnection: x-b")
	// More names than are walked (a set of them, nominees)
	var long []string
	for i := range 80 {
		long = append(long, fmt.Sprintf("X-N%02d", i))
	}
	f.Add("x-n01: 1\r\nConnection: " + strings.Join(long, ", ") + "\r\nX-N02: 2\r\nx-keep: 3\r\nx-N79: 4\r\nKeep-Alive: 5")
	f.Fuzz(func(t *testing.T, head string) {
		var resp fasthttp.Response
		resp.Header.DisableNormalizing()
		resp.Header.SetNoDefaultContentType(true)
		raw := "HTTP/1.1 200 OK\r\n" + head + "\r\nContent-Length: 0\r\n\r\n"
		if err := resp.Header.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
			return
		}
		checkHopDrop(t, head, resp.Header.All, func() { dropHopResponse(&resp.Header) })
	})
}

// A request not read from the wire (no raw head to look in) has every
// hop-by-hop header dropped as well.
func TestDropHopRequestBuilt(t *testing.T) {
	var req fasthttp.Request
	req.Header.Set("Keep-Alive", "timeout=5")
	req.Header.Set("Proxy-Authorization", "Basic eA==")
	req.Header.Set("X-Keep", "1")
	dropHopRequest(&req.Header, false)
	if req.Header.Peek("Keep-Alive") != nil || req.Header.Peek("Proxy-Authorization") != nil || string(req.Header.Peek("X-Keep")) != "1" {
		t.Fatalf("head %q", req.Header.String())
	}
}

// Whatever head a client sends that the server reads, no hop-by-hop
// header is left after the drop and every other header stays.
func FuzzDropHopRequest(f *testing.F) {
	f.Add("keep-alive: timeout=5\r\nX-A: 1")
	f.Add("Connection: close\r\nTrailer: X-T\r\nTE: trailers\r\nproxy-AUTHORIZATION: x\r\nCookie: a=b; c")
	f.Add("X-A: 1\r\n folded\r\nTE : trailers\r\nTransfer-Encoding: chunked")
	f.Add("x-a: 1\r\nConnection: X-A, Host ,, close\r\nCookie: c=d\r\nconnection: cookie")
	f.Fuzz(func(t *testing.T, head string) {
		var req fasthttp.Request
		raw := "GET / HTTP/1.1\r\nHost: a.p2p\r\n" + head + "\r\nContent-Length: 0\r\n\r\n"
		if err := req.Header.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
			return
		}
		checkHopDrop(t, head, req.Header.All, func() { dropHopRequest(&req.Header, namesOf(&req.Header).hop) })
	})
}

// checkHopDrop runs drop and fails if a hop-by-hop header is left in
// what all yields, or a header a Connection header named (but Host,
// Content-Length), or the count of the other headers changed. A name is
// hop-by-hop if it is one of hopHeaders in any case (compared here, not
// by isHopName, which the drops rest on).
func checkHopDrop(t *testing.T, head string, all func() iter.Seq2[[]byte, []byte], drop func()) {
	t.Helper()
	nominated := map[string]bool{}
	for k, v := range all() {
		if strings.EqualFold(string(k), "Connection") {
			for tok := range strings.SplitSeq(string(v), ",") {
				tok = strings.ToLower(strings.Trim(tok, " \t"))
				if tok != "host" && tok != "content-length" {
					nominated[tok] = true
				}
			}
		}
	}
	others := func() (n int, hop string) {
		for k := range all() {
			named := nominated[strings.ToLower(string(k))]
			if named {
				hop = string(k)
			}
			for _, h := range hopHeaders {
				if strings.EqualFold(string(k), h) {
					named, hop = true, string(k)
				}
			}
			if !named {
				n++
			}
		}
		return n, hop
	}
	before, _ := others()
	drop()
	after, hop := others()
	if hop != "" {
		t.Fatalf("%q left in %q", hop, head)
	}
	if after != before {
		t.Fatalf("%d other headers before, %d after, in %q", before, after, head)
	}
}

// Through the edge: the headers a client's Connection header names do
// not reach the upstream, but the forwarding ones a proxy in front of the
// edge may have added (the X-Forwarded-For chain, Forwarded, X-Real-IP),
// and those an upstream's Connection header names reach no client, over
// HTTP/1.1 or HTTP/2 (whose requests cannot carry Connection at all).
func TestEdgeDropsNominatedHeaders(t *testing.T) {
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "X-Internal, keep-alive")
		w.Header().Set("X-Internal", "1")
		w.Header().Set("X-Public", "1")
		fmt.Fprintf(w, "hop=%q kept=%q", r.Header.Get("X-Hop"), r.Header.Get("X-Kept"))
		if r.Header.Get("X-Kept") != "" { // the HTTP/1.1 request
			fmt.Fprintf(w, " xff=%q fwd=%q real=%q", r.Header.Get("X-Forwarded-For"), r.Header.Get("Forwarded"), r.Header.Get("X-Real-Ip"))
		}
	})
	e := startTestEdge(t, map[string]string{"nh.p2p": up}, Deps{})
	httpAddr, _ := e.s.Addrs()
	c := sendRaw(t, httpAddr.String(), "GET / HTTP/1.1\r\nHost: nh.p2p\r\nConnection: keep-alive, X-Hop, x-forwarded-for, Forwarded,X-Real-IP\r\nX-Hop: secret\r\nX-Kept: 1\r\n"+
		"X-Forwarded-For: 203.0.113.7\r\nForwarded: for=203.0.113.7\r\nX-Real-IP: 203.0.113.7\r\n\r\n")
	_, h1, b := answer(t, c)
	if want := `hop="" kept="1" xff="203.0.113.7, 127.0.0.1" fwd="for=203.0.113.7" real="203.0.113.7"`; b != want {
		t.Fatalf("HTTP/1.1: the upstream saw %s, want %s", b, want)
	}
	check := func(proto string, h http.Header) {
		t.Helper()
		if h.Get("X-Internal") != "" || h.Get("X-Public") != "1" || h.Get("Connection") != "" && proto != "HTTP/1.1" {
			t.Fatalf("%s: answer's headers %v", proto, h)
		}
	}
	check("HTTP/1.1", h1)
	resp2, body := e.do(t, http.MethodGet, "https://nh.p2p/", nil, 0)
	if body != `hop="" kept=""` {
		t.Fatalf("HTTP/2: the upstream saw %s", body)
	}
	check("HTTP/2", resp2.Header)
}

// A folded line belongs to the field before it, as fasthttp reads it:
// its bytes go on that field's value, and a Connection value folded
// between two names names both.
func TestRawFieldsFolds(t *testing.T) {
	var got []string
	for k, v := range rawFields([]byte("A: 1\r\nB: 2\r\n 3\r\n\tx: y\r\nC : 4\r\nConnection: X-A,\r\n X-B\r\n")) {
		got = append(got, fmt.Sprintf("%s=%q", k, v))
	}
	want := []string{`A="1"`, `B="2\r\n 3\r\n\tx: y"`, `C="4"`, `Connection="X-A,\r\n X-B"`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fields %v, want %v", got, want)
	}
	var names []string
	for v := []byte("X-A,\r\n X-B"); len(v) > 0; {
		var k []byte
		k, v = nextNominee(v)
		names = append(names, string(k))
	}
	if fmt.Sprint(names) != "[X-A X-B]" {
		t.Fatalf("nominees %q, want X-A and X-B", names)
	}
}

// TestEdgeBoundsWhatConnectionNames: a request whose Connection fields
// name more than maxNominees fields in all (each a delete that walks the
// whole head) is refused with 400 and its connection closed, before it
// reaches the upstream; one naming maxNominees has each dropped. A head
// of many fields of one hop-by-hop name loses them all, and keeps the
// rest.
func TestEdgeBoundsWhatConnectionNames(t *testing.T) {
	var reached atomic.Int64
	up := serveUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		fmt.Fprintf(w, "n0=%q n31=%q ka=%q other=%d", r.Header.Get("N0"), r.Header.Get("N31"), r.Header.Get("Keep-Alive"), len(r.Header.Values("Other")))
	})
	e := startTestEdge(t, map[string]string{"nb.p2p": up}, Deps{})
	httpAddr, _ := e.s.Addrs()
	head := func(names int, split bool) string {
		var b, list strings.Builder
		b.WriteString("GET / HTTP/1.1\r\nHost: nb.p2p\r\n")
		for i := range names {
			fmt.Fprintf(&b, "N%d: v\r\n", i)
			if split && i == names/2 { // a second Connection field counts with the first
				b.WriteString("Connection: " + list.String() + "\r\n")
				list.Reset()
			}
			if list.Len() > 0 {
				list.WriteString(", ")
			}
			fmt.Fprintf(&list, "N%d", i)
		}
		return b.String() + "Connection: " + list.String() + "\r\n\r\n"
	}
	for _, split := range []bool{false, true} {
		st, h, b := answer(t, sendRaw(t, httpAddr.String(), head(maxNominees+1, split)))
		if st != http.StatusBadRequest || !strings.Contains(b, "names more than 32 fields") || h.Get("Connection") != "close" {
			t.Fatalf("%d names (split %v): %d %v %q", maxNominees+1, split, st, h, b)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("%d refused requests reached the upstream", n)
	}
	st, _, b := answer(t, sendRaw(t, httpAddr.String(), head(maxNominees, true)))
	if st != http.StatusOK || b != `n0="" n31="" ka="" other=0` {
		t.Fatalf("%d names: %d %q", maxNominees, st, b)
	}
	var many strings.Builder
	many.WriteString("GET / HTTP/1.1\r\nHost: nb.p2p\r\n")
	for range 500 {
		many.WriteString("Keep-Alive: 1\r\nOther: 1\r\n")
	}
	st, _, b = answer(t, sendRaw(t, httpAddr.String(), many.String()+"\r\n"))
	if st != http.StatusOK || b != `n0="" n31="" ka="" other=500` {
		t.Fatalf("500 Keep-Alive fields: %d %q", st, b)
	}
}
