package panel

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"path"
	"strings"
	"sync"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
)

//go:embed www
var www embed.FS

// Tabs are the panel's tabs, in the order the navigation shows them; GET
// /{tab} redirects to /#<tab>.
var Tabs = []string{"domains", "host", "local-dns", "entries", "peers", "certs", "interfaces", "logs", "settings"}

// CSP is the Content-Security-Policy of every panel answer: nothing but
// the panel's own files and API, no inline code, no framing.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// file is one embedded file, ready to serve.
type file struct {
	body        []byte
	etag        string // quoted, as sent
	contentType string
}

// files maps a URL path ("/", "/admin.js", "/js/api.js") to its file,
// built from the embedded folder on first use (not at package init: every
// process of the binary, the metrics agent included, would pay its
// 0.75 MB and 2 ms).
var files = sync.OnceValue(mustLoad)

func mustLoad() map[string]*file {
	out, err := load(www)
	if err != nil {
		// The folder is compiled in: failing here is a broken build.
		panic(err)
	}
	return out
}

func load(fsys fs.FS) (map[string]*file, error) {
	out := map[string]*file{}
	err := fs.WalkDir(fsys, "www", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		switch path.Ext(p) {
		// Not left to the system's mime table, which may lack them.
		case ".js":
			ct = "text/javascript; charset=utf-8"
		case ".css":
			ct = "text/css; charset=utf-8"
		case ".html":
			ct = "text/html; charset=utf-8"
		case ".svg":
			ct = "image/svg+xml"
		}
		if ct == "" {
			return fmt.Errorf("panel: no content type for %s", p)
		}
		url := strings.TrimPrefix(p, "www")
		if url == "/index.html" {
			url = "/"
		}
		out[url] = &file{body: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, contentType: ct}
		return nil
	})
	return out, err
}

// Register adds the panel routes to r.
func Register(r *router.Router) {
	for p := range files() {
		r.GET(p, serve)
		// fasthttp sends the headers of HEAD without the body.
		r.HEAD(p, serve)
	}
	for _, tab := range Tabs {
		target := "/#" + tab
		r.GET("/"+tab, func(ctx *fasthttp.RequestCtx) {
			// A relative Location, as the spec shows (ctx.Redirect would
			// make it absolute).
			ctx.Response.Header.Set("Location", target)
			ctx.SetStatusCode(fasthttp.StatusFound)
		})
	}
	r.GET("/favicon.ico", NotFound)
}

// NotFound answers 404 "Not Found".
func NotFound(ctx *fasthttp.RequestCtx) {
	httpx.WriteError(ctx, nil, httpx.Errorf(fasthttp.StatusNotFound, "Not Found"))
}

func serve(ctx *fasthttp.RequestCtx) {
	f := files()[string(ctx.Path())]
	if f == nil {
		NotFound(ctx)
		return
	}
	h := &ctx.Response.Header
	h.Set("Content-Security-Policy", CSP)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", f.etag)
	h.Set("Referrer-Policy", "no-referrer")
	if etagMatch(ctx.Request.Header.Peek("If-None-Match"), f.etag) {
		ctx.SetStatusCode(fasthttp.StatusNotModified)
		return
	}
	ctx.SetContentType(f.contentType)
	ctx.SetBody(f.body)
}

// etagMatch reports whether an If-None-Match header names etag (RFC 9110
// §13.1.2: a list of entity tags or "*", weak comparison).
func etagMatch(header []byte, etag string) bool {
	for _, t := range bytes.Split(header, []byte(",")) {
		t = bytes.TrimSpace(t)
		t = bytes.TrimPrefix(t, []byte("W/"))
		if string(t) == etag || string(t) == "*" {
			return true
		}
	}
	return false
}
