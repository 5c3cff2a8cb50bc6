package h2srv

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"peerdns/internal/testutil"
)

func TestGet(t *testing.T) {
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Method", r.Method)
		w.Header().Set("X-Proto", fmt.Sprintf("%s %d.%d", r.Proto, r.ProtoMajor, r.ProtoMinor))
		w.Header().Set("X-Host", r.Host)
		w.Header().Set("X-URI", r.RequestURI+" "+r.URL.Path+" "+r.URL.RawQuery)
		w.Header().Set("X-Cookie", r.Header.Get("Cookie"))
		w.Header().Set("X-TLS", fmt.Sprint(r.TLS != nil && r.TLS.NegotiatedProtocol == "h2"))
		w.Header().Set("X-Remote", fmt.Sprint(strings.HasPrefix(r.RemoteAddr, "127.0.0.1:")))
		w.Header().Set("X-Length", fmt.Sprint(r.ContentLength, r.Body == http.NoBody))
		w.Header()["Content-Type"] = nil
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "hello")
	}))
	for name, cl := range testClients(t) {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", ts.url("/a/b?q=1"), nil)
			req.AddCookie(&http.Cookie{Name: "a", Value: "1"})
			req.AddCookie(&http.Cookie{Name: "b", Value: "2"})
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(body) != "hello" {
				t.Fatalf("body %q, %v", body, err)
			}
			want := map[string]string{
				"X-Method":       "GET",
				"X-Proto":        "HTTP/2.0 2.0",
				"X-Host":         ts.addr,
				"X-Uri":          "/a/b?q=1 /a/b q=1",
				"X-Cookie":       "a=1; b=2",
				"X-Tls":          "true",
				"X-Remote":       "true",
				"X-Length":       "0 true",
				"Content-Length": "5",
				"Content-Type":   "",
				"Connection":     "",
			}
			for k, v := range want {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if resp.ProtoMajor != 2 || resp.Header.Get("Date") == "" {
				t.Errorf("proto %d, date %q", resp.ProtoMajor, resp.Header.Get("Date"))
			}
		})
	}
}

// TestPostLarge sends a body several times the stream and connection
// windows, and reads back its digest and length.
func TestPostLarge(t *testing.T) {
	ts := newTestServer(t, Config{StreamWindow: 256 << 10, ConnWindow: 512 << 10}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			w.WriteHeader(500)
			return
		}
		fmt.Fprintf(w, "%d %x %d", n, h.Sum(nil), r.ContentLength)
	}))
	body := make([]byte, 5<<20+123)
	for i := range body {
		body[i] = byte(i * 7)
	}
	sum := sha256.Sum256(body)
	for name, cl := range testClients(t) {
		t.Run(name, func(t *testing.T) {
			for _, known := range []bool{true, false} {
				var rd io.Reader = bytes.NewReader(body)
				if !known {
					rd = io.MultiReader(rd) // hides the length
				}
				resp, err := cl.Post(ts.url("/up"), "application/octet-stream", rd)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				wantLen := int64(len(body))
				if !known {
					wantLen = -1
				}
				if want := fmt.Sprintf("%d %x %d", len(body), sum, wantLen); string(got) != want {
					t.Fatalf("known length %v: got %q, want %q", known, got, want)
				}
			}
		})
	}
	// A large answer too: the client's windows bound the server.
	big := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body)
	}))
	for name, cl := range testClients(t) {
		resp, err := cl.Get(big.url("/down"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%s: download of %d bytes: got %d, %v", name, len(body), len(got), err)
		}
	}
}

// TestFullDuplex: the client sends a piece, reads its echo, then sends
// the next, on one stream.
func TestFullDuplex(t *testing.T) {
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		buf := make([]byte, 64)
		for {
			n, err := r.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(bytes.ToUpper(buf[:n]))
				if err := http.NewResponseController(w).Flush(); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}))
	for name, cl := range testClients(t) {
		t.Run(name, func(t *testing.T) {
			pr, pw := io.Pipe()
			req, _ := http.NewRequest("POST", ts.url("/duplex"), pr)
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := make([]byte, 64)
			for i := range 20 {
				piece := fmt.Sprintf("piece %d", i)
				if _, err := pw.Write([]byte(piece)); err != nil {
					t.Fatal(err)
				}
				n, err := io.ReadAtLeast(resp.Body, buf, len(piece))
				if err != nil || string(buf[:n]) != strings.ToUpper(piece) {
					t.Fatalf("echo %d: %q, %v", i, buf[:n], err)
				}
			}
			pw.Close()
			if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
				t.Fatalf("after the last piece: %q, %v", rest, err)
			}
		})
	}
}

func TestTrailers(t *testing.T) {
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Trailer", "X-Declared")
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "body")
		w.Header().Set("X-Declared", "d "+r.Trailer.Get("X-Req"))
		w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
	}))
	for name, cl := range testClients(t) {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", ts.url("/t"), io.MultiReader(strings.NewReader("x")))
			req.Trailer = http.Header{"X-Req": {"rt"}}
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(body) != "body" {
				t.Fatalf("body %q, %v", body, err)
			}
			if got := resp.Trailer.Get("X-Declared"); got != "d rt" {
				t.Errorf("X-Declared trailer %q, want %q", got, "d rt")
			}
			if got := resp.Trailer.Get("Grpc-Status"); got != "0" {
				t.Errorf("Grpc-Status trailer %q, want 0", got)
			}
			if got := resp.Header.Get("X-Declared"); got != "" {
				t.Errorf("X-Declared in the head: %q", got)
			}
		})
	}
}

// TestContinue: a 100 goes at the first Read of the body, never to a
// handler that answers without reading; 103 passes as sent.
func TestContinue(t *testing.T) {
	var awaited atomic.Value
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		awaited.Store(AwaitsContinue(r.Body))
		if r.Header.Get("Expect") != "" {
			w.WriteHeader(500)
			return
		}
		switch r.URL.Path {
		case "/read":
			b, _ := io.ReadAll(r.Body)
			if AwaitsContinue(r.Body) {
				w.WriteHeader(500)
			}
			_, _ = w.Write(b)
		case "/early":
			w.Header().Set("Link", "</s.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Del("Link")
			_, _ = io.WriteString(w, "late")
		default:
			w.WriteHeader(404)
		}
	}))
	for name, cl := range testClients(t) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				path, want string
				status     int
				got100     bool
				got1xx     int
			}{
				{"/read", "payload", 200, true, 0},
				{"/missing", "", 404, false, 0},
				{"/early", "late", 200, false, 103},
			} {
				var got100 atomic.Bool
				var got1xx atomic.Int32
				trace := &httptrace.ClientTrace{
					Got100Continue: func() { got100.Store(true) },
					Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
						if code != 100 && h.Get("Link") != "" {
							got1xx.Store(int32(code))
						}
						return nil
					},
				}
				var body io.Reader
				if tc.path != "/early" {
					body = strings.NewReader("payload")
				}
				req, _ := http.NewRequest("POST", ts.url(tc.path), body)
				if body != nil {
					req.Header.Set("Expect", "100-continue")
				}
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
				resp, err := cl.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.status || string(b) != tc.want {
					t.Errorf("%s: %d %q, want %d %q", tc.path, resp.StatusCode, b, tc.status, tc.want)
				}
				if got100.Load() != tc.got100 || int(got1xx.Load()) != tc.got1xx {
					t.Errorf("%s: got 100 %v, 1xx %d; want %v, %d", tc.path, got100.Load(), got1xx.Load(), tc.got100, tc.got1xx)
				}
				if body != nil && awaited.Load() != true {
					t.Errorf("%s: AwaitsContinue false before the first read", tc.path)
				}
			}
		})
	}
}

func TestNoBody(t *testing.T) {
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/204" {
			w.WriteHeader(204)
			if _, err := w.Write([]byte("x")); !errors.Is(err, http.ErrBodyNotAllowed) {
				panic(fmt.Sprintf("Write after 204: %v", err))
			}
			return
		}
		_, _ = io.WriteString(w, "twelve bytes")
	}))
	for name, cl := range testClients(t) {
		t.Run(name, func(t *testing.T) {
			resp, err := cl.Get(ts.url("/204"))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 204 || len(b) != 0 {
				t.Errorf("204: %d %q", resp.StatusCode, b)
			}
			resp, err = cl.Head(ts.url("/head"))
			if err != nil {
				t.Fatal(err)
			}
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || len(b) != 0 || resp.ContentLength != 12 {
				t.Errorf("HEAD: %d %q length %d", resp.StatusCode, b, resp.ContentLength)
			}
		})
	}
}

// TestShortBody: a handler that writes less than its declared length
// makes the client see an error, not a complete body.
func TestShortBody(t *testing.T) {
	ts := newTestServer(t, Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		_, _ = io.WriteString(w, "only fifty bytes..................................")
		if r.URL.Path == "/flushed" {
			w.(http.Flusher).Flush()
		}
		if _, err := w.Write(make([]byte, 60)); !errors.Is(err, http.ErrContentLength) {
			panic(fmt.Sprintf("write past the length: %v", err))
		}
	}))
	for name, cl := range testClients(t) {
		for _, path := range []string{"/held", "/flushed"} {
			t.Run(name+path, func(t *testing.T) {
				resp, err := cl.Get(ts.url(path))
				if err != nil {
					return // reset before the head: an error too
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil {
					t.Fatalf("read %d bytes of 100 with no error", len(b))
				}
			})
		}
	}
}

// TestPanic: a panicking handler resets its stream; the connection
// serves the next request. http.ErrAbortHandler is quiet, any other
// panic is logged.
func TestPanic(t *testing.T) {
	var logs testutil.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ts := newTestServer(t, Config{Log: log}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/abort":
			panic(http.ErrAbortHandler)
		case "/panic":
			panic("handler bug")
		}
		_, _ = io.WriteString(w, "ok")
	}))
	for name, cl := range testClients(t) {
		t.Run(name, func(t *testing.T) {
			for _, path := range []string{"/abort", "/panic"} {
				resp, err := cl.Get(ts.url(path))
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				if err == nil {
					t.Fatalf("%s: no error", path)
				}
			}
			resp, err := cl.Get(ts.url("/ok"))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "ok" {
				t.Fatalf("after the abort: %q", b)
			}
		})
	}
	if got := logs.String(); strings.Count(got, "handler panic") != 2 || !strings.Contains(got, "handler bug") || strings.Contains(got, "abort Handler") {
		t.Fatalf("logs: %s", got)
	}
}

var _ = time.Second

// TestConcurrent: many streams at once on one connection, more than the
// concurrency limit, with bodies both ways; each answer is its own.
func TestConcurrent(t *testing.T) {
	ts := newTestServer(t, Config{MaxConcurrentStreams: 8}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		w.Header().Set("X-Path", r.URL.Path)
		_, _ = w.Write(bytes.Repeat(b, 3))
	}))
	for name, cl := range testClients(t) {
		t.Run(name, func(t *testing.T) {
			errs := make(chan error, 64)
			for i := range 64 {
				go func() {
					want := strings.Repeat(fmt.Sprintf("<%d>", i), 1000*(i%5))
					resp, err := cl.Post(ts.url(fmt.Sprintf("/%d", i)), "text/plain", strings.NewReader(want))
					if err != nil {
						errs <- err
						return
					}
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && (string(got) != strings.Repeat(want, 3) || resp.Header.Get("X-Path") != fmt.Sprintf("/%d", i)) {
						err = fmt.Errorf("request %d: %d bytes, path %q", i, len(got), resp.Header.Get("X-Path"))
					}
					errs <- err
				}()
			}
			for range 64 {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
		})
	}
}
