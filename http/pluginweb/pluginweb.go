// Package pluginweb answers HTTP requests for a plugin's domain: the
// edge proxy calls Serve when the Host (or SNI) is a loaded plugin's
// domain.
//
//   - Writes (POST, PUT, DELETE, PATCH, and every method but GET, HEAD
//     and OPTIONS: a lower-case "post" a handler's code may take for
//     POST, WebDAV's MKCOL, a method of the plugin's own; methods
//     compare with case, RFC 9110 §9.1) need a token (internal/token):
//     "Authorization: Bearer <t>" or "X-Auth-Token: <t>". Missing,
//     malformed, expired or badly signed: 401 with the spec's JSON; a
//     valid token of another peer: 403 with the spec's JSON; this node's
//     token: the request goes on with header X-Peerdns-Peer set to the
//     verified peer id. Whatever X-Peerdns-Peer a client sends is
//     removed first, so a handler can trust the header.
//   - The token itself never reaches a handler, on any method: X-Auth-Token
//     is removed, and so is an Authorization header whose Bearer value is
//     a valid token (of this node or another); other Authorization
//     values (a plugin's own scheme) pass. A handler holding a token could
//     write to every plugin domain of the peer that signed it until it
//     expires; the verified peer id is all it needs.
//   - GET and HEAD are answered from the plugin's www folder when the
//     path names a file there (a folder: its index.html); paths are
//     cleaned and resolved with symlinks followed, and anything that
//     lands outside www is not served from it. A path that ends in a
//     slash names a folder, as it does for nginx: /file.txt/ is not the
//     file file.txt (nginx answers 404), so it is not served from www
//     and goes on as any other path www has nothing for. A folder named
//     without the slash is redirected (301) to its name with it, as
//     nginx does, so the relative links of its index.html resolve inside
//     it.
//   - Everything else goes to the handler (handle): 502 when it is not
//     running or answers garbage, 504 when it does not answer within
//     Timeout. A plugin without a handler answers 404 (GET) or 405.
//   - The handler's answer is a final one: a 1xx status is a 502 (a
//     client takes 100 or 101 for an interim answer or a protocol
//     switch and waits for what never comes), as nginx refuses an
//     upstream's 1xx. Its headers pass but for Content-Length,
//     Transfer-Encoding and Connection, which the server sets, and a
//     header whose name is not an HTTP token or whose value holds a
//     control byte other than a tab, which is dropped (a client would
//     refuse the whole answer); line breaks in values become spaces.
//     Headers of more than MaxHeaderBytes in all are a 502, as nginx
//     answers an upstream whose headers overflow its buffer (browsers
//     refuse an answer with a few hundred KiB of them).
package pluginweb

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http/httpguts"

	"peerdns/internal/token"
	"peerdns/messages"
)

// Site is a loaded plugin as the web handler and the admin API see it
// (the plugin actor's runtime implements it; the composition root hands
// it in, so no http package imports an actor package).
type Site interface {
	Static() string   // the www folder, absolute; "" without one
	HasHandler() bool // requests go to a handler (a process or in-process)
	Handle(ctx context.Context, req *messages.PluginHandleRequest) (*messages.PluginHandleResponse, error)
	HasAction(name string) bool
	Action(ctx context.Context, name string, params json.RawMessage) (json.RawMessage, error)
}

// Sites finds the loaded plugin of a domain (lower case, no trailing
// dot); nil when none is loaded there.
type Sites interface {
	Site(domain string) Site
}

// PeerHeader carries the verified peer id of a write to the handler.
const PeerHeader = "X-Peerdns-Peer"

// Timeout bounds one handle call.
const Timeout = 30 * time.Second

// MaxBody is the largest request body passed to a handler.
const MaxBody = 8 << 20

// Server serves plugin domains for one node.
type Server struct {
	Self    string           // this node's peer id
	Now     func() time.Time // default time.Now
	Timeout time.Duration    // default Timeout
}

var (
	unauthorized = []byte(`{"error":"Authentication required","message":"Invalid or missing authentication token"}`)
	forbidden    = []byte(`{"error":"Forbidden","message":"Only the local peer can perform this operation"}`)
)

// isWrite: a request that needs a token. Reads are the methods that
// are safe by definition and a browser's CORS preflight (OPTIONS, sent
// without credentials); any other method may change something.
func isWrite(m string) bool {
	switch m {
	case fasthttp.MethodGet, fasthttp.MethodHead, fasthttp.MethodOptions:
		return false
	}
	return true
}

// Serve answers ctx for the plugin rt.
func (s *Server) Serve(ctx *fasthttp.RequestCtx, rt Site) {
	ctx.Request.Header.Del(PeerHeader)
	method := string(ctx.Method())
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	if isWrite(method) {
		raw := token.FromHeaders(string(ctx.Request.Header.Peek("Authorization")), string(ctx.Request.Header.Peek("X-Auth-Token")))
		t, err := token.Check(raw, now())
		if err != nil {
			jsonError(ctx, 401, unauthorized)
			return
		}
		if t.PeerID != s.Self {
			jsonError(ctx, 403, forbidden)
			return
		}
		ctx.Request.Header.Set(PeerHeader, t.PeerID)
	}
	stripToken(&ctx.Request.Header, now())
	if (method == fasthttp.MethodGet || method == fasthttp.MethodHead) && rt.Static() != "" {
		file, folder := staticFile(rt.Static(), string(ctx.Path()))
		if file != "" && folder != "" {
			// Escaped: a folder's name may hold a '?', a '#' or a space.
			loc := &url.URL{Path: folder + "/", RawQuery: string(ctx.URI().QueryString())}
			ctx.Response.Header.Set("Location", loc.String())
			ctx.SetStatusCode(fasthttp.StatusMovedPermanently)
			return
		}
		if file != "" && sendFile(ctx, file) {
			return
		}
	}
	if !rt.HasHandler() {
		if method == fasthttp.MethodGet || method == fasthttp.MethodHead {
			ctx.Error("Not Found", 404)
		} else {
			ctx.Error("Method Not Allowed", 405)
		}
		return
	}
	s.handle(ctx, rt)
}

func (s *Server) handle(ctx *fasthttp.RequestCtx, rt Site) {
	body := ctx.Request.Body()
	if len(body) > MaxBody {
		ctx.Error("Request Entity Too Large", 413)
		return
	}
	req := &messages.PluginHandleRequest{
		Method: string(ctx.Method()), Path: string(ctx.Path()), Query: string(ctx.QueryArgs().QueryString()),
		Headers: map[string]string{}, Body: append([]byte(nil), body...),
	}
	for k, v := range ctx.Request.Header.All() {
		if _, dup := req.Headers[string(k)]; !dup {
			req.Headers[string(k)] = string(v)
		}
	}
	d := s.Timeout
	if d <= 0 {
		d = Timeout
	}
	cctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	resp, err := rt.Handle(cctx, req)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		ctx.Error("Gateway Timeout: the plugin did not answer in time", 504)
		return
	case err != nil:
		ctx.Error("Bad Gateway: "+err.Error(), 502)
		return
	case resp.Status < 200 || resp.Status > 599:
		ctx.Error("Bad Gateway: the plugin answered with status "+strconv.Itoa(resp.Status)+", not a final one", 502)
		return
	case headerBytes(resp.Headers) > MaxHeaderBytes:
		ctx.Error("Bad Gateway: the plugin's headers are over "+strconv.Itoa(MaxHeaderBytes>>10)+" KiB", 502)
		return
	}
	for k, v := range resp.Headers {
		if strings.EqualFold(k, "Content-Length") || strings.EqualFold(k, "Transfer-Encoding") || strings.EqualFold(k, "Connection") || !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		v = lineBreaks.Replace(v)
		if !httpguts.ValidHeaderFieldValue(v) {
			continue // a control byte: the client would refuse the whole answer
		}
		ctx.Response.Header.Set(k, v)
	}
	ctx.SetStatusCode(resp.Status)
	ctx.SetBody(resp.Body)
}

// lineBreaks turns the line breaks of a handler's header value into
// spaces.
var lineBreaks = strings.NewReplacer("\r", " ", "\n", " ")

// MaxHeaderBytes bounds the names and values of a handler's headers.
const MaxHeaderBytes = 64 << 10

func headerBytes(h map[string]string) int {
	n := 0
	for k, v := range h {
		n += len(k) + len(v)
	}
	return n
}

// stripToken removes the token headers: X-Auth-Token, and an
// Authorization whose Bearer value is a valid token.
func stripToken(h *fasthttp.RequestHeader, now time.Time) {
	h.Del("X-Auth-Token")
	if raw := token.FromHeaders(string(h.Peek("Authorization")), ""); raw != "" {
		if _, err := token.Check(raw, now); err == nil {
			h.Del("Authorization")
		}
	}
}

func jsonError(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// staticFile maps a request path to a regular file inside root ("" when
// there is none): the path is cleaned, a folder means its index.html, a
// path ending in a slash must name a folder, and the result, symlinks
// followed, must stay inside root. folder is the cleaned path of a
// folder named without its trailing slash ("" otherwise): the caller
// redirects to it with the slash rather than serve its index.html.
func staticFile(root, reqPath string) (file, folder string) {
	clean := path.Clean("/" + reqPath)
	p := filepath.Join(root, filepath.FromSlash(clean))
	st, err := os.Stat(p)
	switch {
	case err == nil && st.IsDir():
		p = filepath.Join(p, "index.html")
		if !strings.HasSuffix(reqPath, "/") {
			folder = clean
		}
	case strings.HasSuffix(reqPath, "/"):
		// Clean dropped the slash that says "a folder"; this is none.
		return "", ""
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", ""
	}
	rel, err := filepath.Rel(root, real)
	if err != nil || !filepath.IsLocal(rel) {
		return "", ""
	}
	st, err = os.Stat(real)
	if err != nil || !st.Mode().IsRegular() {
		return "", ""
	}
	return real, folder
}

// sendFile answers with the file's content (fasthttp's own file server
// would write compressed copies into the plugin's folder). The file is
// opened without blocking and must still be a regular file: the plugin
// owns its folder and may have put a FIFO there since staticFile looked,
// whose open would wait for a writer forever.
func sendFile(ctx *fasthttp.RequestCtx, file string) bool {
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return false
	}
	ct := mime.TypeByExtension(filepath.Ext(file))
	if ct == "" {
		ct = "application/octet-stream"
	}
	ctx.SetContentType(ct)
	ctx.Response.Header.Set("Last-Modified", st.ModTime().UTC().Format(http.TimeFormat))
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.SetBodyStream(f, int(st.Size())) // fasthttp closes f
	return true
}

// TokenJSON is GET /api/token's body on the profile domain.
func TokenJSON(tok string, t token.Token) []byte {
	b, _ := json.Marshal(map[string]any{"token": tok, "expiresAt": t.ExpiresAt, "peerId": t.PeerID})
	return b
}
