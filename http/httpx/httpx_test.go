package httpx

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/valyala/fasthttp"

	"peerdns/internal/testutil"
)

// serve starts h on a loopback listener and returns its base URL.
func serve(t *testing.T, h fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(); <-done })
	return "http://" + ln.Addr().String()
}

func TestWriteError(t *testing.T) {
	var logs testutil.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cause := errors.New("disk on fire")
	tests := []struct {
		name     string
		err      error
		status   int
		body     string
		ctype    string
		logsWarn bool
	}{
		{"plain error is a 500 with its text", cause, 500, "disk on fire", "text/plain; charset=utf-8", true},
		{"Error keeps status and message, hides Err", &Error{Status: 403, Msg: "no claim", Err: cause}, 403, "no claim", "text/plain; charset=utf-8", false},
		{"wrapped Error is found", fmt.Errorf("ctx: %w", BadRequest("bad %s", "index")), 400, "bad index", "text/plain; charset=utf-8", false},
		{"zero status is a 500", &Error{Msg: "oops"}, 500, "oops", "text/plain; charset=utf-8", true},
		{"JSON body", &Error{Status: 400, Msg: "m", JSON: map[string]any{"errors": []string{"x"}}}, 400, `{"errors":["x"]}` + "\n", "application/json; charset=utf-8", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := strings.Count(logs.String(), "request failed")
			url := serve(t, Wrap(log, func(ctx *fasthttp.RequestCtx) error {
				ctx.Response.Header.Set("X-Half-Written", "yes")
				return tt.err
			}))
			resp, err := testutil.Client.Get(url + "/x")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body := readAll(t, resp.Body)
			if resp.StatusCode != tt.status || body != tt.body || resp.Header.Get("Content-Type") != tt.ctype {
				t.Fatalf("WriteError(%v) = %d %q %q, want %d %q %q", tt.err, resp.StatusCode, body, resp.Header.Get("Content-Type"), tt.status, tt.body, tt.ctype)
			}
			if resp.Header.Get("X-Half-Written") != "" {
				t.Fatal("headers of the failed handler were sent")
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Fatal("error without nosniff")
			}
			if logged := strings.Count(logs.String(), "request failed") > before; logged != tt.logsWarn {
				t.Fatalf("logged = %v, want %v (5xx only): %s", logged, tt.logsWarn, logs.String())
			}
		})
	}
}

func TestJSONEndsWithNewline(t *testing.T) {
	url := serve(t, Wrap(nil, func(ctx *fasthttp.RequestCtx) error {
		if string(ctx.Path()) == "/cached" {
			return JSONBytes(ctx, []byte(`[1,2]`))
		}
		return JSON(ctx, 201, map[string]int{"a": 1})
	}))
	for _, tt := range []struct{ path, want string }{{"/json", "{\"a\":1}\n"}, {"/cached", "[1,2]\n"}} {
		resp, err := testutil.Client.Get(url + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp.Body)
		resp.Body.Close()
		if body != tt.want || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
			t.Fatalf("GET %s = %q %q, want %q", tt.path, body, resp.Header.Get("Content-Type"), tt.want)
		}
	}
}

func TestDecodeJSON(t *testing.T) {
	type req struct {
		Domain string `json:"domain"`
		Count  int    `json:"count"`
	}
	tests := []struct {
		name, body string
		status     int
		msg        string
	}{
		{"ok", `{"domain":"a.p2p","count":2}`, 200, "a.p2p 2"},
		{"empty", "", 400, "request body is empty"},
		{"malformed", `{"domain":`, 400, "invalid JSON"},
		{"wrong type names the field", `{"count":"two"}`, 400, `field "count" must be an integer from -9223372036854775808 to 9223372036854775807, got string`},
		{"not an object", `[1]`, 400, "invalid JSON"},
	}
	url := serve(t, Wrap(nil, func(ctx *fasthttp.RequestCtx) error {
		var r req
		if err := DecodeJSON(ctx, &r, fasthttp.StatusBadRequest); err != nil {
			return err
		}
		ctx.SetBodyString(fmt.Sprintf("%s %d", r.Domain, r.Count))
		return nil
	}))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := testutil.Call(t, "POST", url+"/", tt.body)
			if code != tt.status || !strings.Contains(body, tt.msg) {
				t.Fatalf("DecodeJSON(%q) = %d %q, want %d containing %q", tt.body, code, body, tt.status, tt.msg)
			}
		})
	}
	// badStatus is the caller's: endpoints whose spec lists only 200/500.
	url500 := serve(t, Wrap(nil, func(ctx *fasthttp.RequestCtx) error {
		return DecodeJSON(ctx, &req{}, fasthttp.StatusInternalServerError)
	}))
	if code, _ := testutil.Call(t, "POST", url500+"/", "{"); code != 500 {
		t.Fatalf("DecodeJSON with badStatus 500 = %d", code)
	}
}

func TestAsk(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	type ping struct{}
	type silent struct{}
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *ping:
			c.Respond("pong")
		case *silent:
			// never answers
		}
	}))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })

	if got, err := Ask[string](sys.Root, pid, &ping{}, time.Second); err != nil || got != "pong" {
		t.Fatalf("Ask(ping) = %q, %v", got, err)
	}
	// Wrong reply types and deadlines are internal/ask's, tested there;
	// here only that a silent actor reads as this package's ErrBusy.
	if _, err := Ask[string](sys.Root, pid, &silent{}, 50*time.Millisecond); !errors.Is(err, ErrBusy) {
		t.Fatalf("Ask(silent) = %v, want ErrBusy", err)
	}
}

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
