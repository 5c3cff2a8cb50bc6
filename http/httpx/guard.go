package httpx

import (
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"strings"

	"github.com/valyala/fasthttp"

	"peerdns/messages"
)

// Guard keeps the web pages a user visits from driving a local API that
// has no login (docs/architecture.md, "Local APIs and browsers"). The API binds
// loopback, but a browser on the same machine can reach loopback, so it
// must tell a page's request from its own clients:
//
//   - Host must be on the allowlist (any loopback IP literal and
//     `localhost` on any port, the listen address as bound, and the names
//     given to NewGuard), else 421 Misdirected Request. This stops DNS
//     rebinding: a page under evil.example whose name was re-pointed at
//     127.0.0.1 still sends `Host: evil.example`.
//   - A request whose Origin is present and not an allowed origin (http or
//     https and an allowed host; `null` is never allowed) is refused with
//     403, and so is one whose Sec-Fetch-Site is `cross-site`, or
//     `same-site` without an allowed Origin. `same-origin` and `none`
//     (typed address, bookmark) pass. A loopback or localhost Origin must
//     be the request's own (host and port): another loopback IP serves
//     p2p domains' services from remote peers (127.77.x.y), another port
//     is another local program's pages, and a browser calls both
//     same-site or, on a WebSocket handshake, says nothing. So must a
//     name given without a port (the admin domain, which the node's DNS
//     answers with the admin address): on another port it names another
//     program on the same machine. A name given with its port passes.
//   - A request that carries a body, or names a Content-Type, must name
//     application/json (parameters such as charset are fine), else 415.
//     HTML forms can only send text/plain, urlencoded or multipart bodies
//     without a CORS preflight, and this API answers no preflight, so a
//     page cannot send JSON here; refusing the form types even on empty
//     bodies also covers browsers or extensions that strip Origin.
//
// Clients that send no Origin and no Sec-Fetch-Site (curl, scripts, the
// CLI) pass the second check untouched, bodyless POSTs included; the
// first check only asks them to use an address the API answers on.
//
// Cross-site requests are refused even for a top-level GET navigation, so
// a link to the API from another site gets 403: the address must be
// typed or bookmarked. Allowing those would be safe for reads (the linking
// page never sees the answer) but the rule is simpler with no exception.
//
// A Guard is immutable after NewGuard and safe for concurrent use.
type Guard struct {
	names     map[string]bool // host names and IP literals allowed on any port
	pairs     map[string]bool // host + " " + port allowed on that port only
	anyIPPort string          // bound to 0.0.0.0 or [::]: any IP literal on this port
}

// NewGuard builds a guard for a server listening on addr (host:port as
// bound; "" when unknown) that is also reached under hosts: "name" allows
// the name on any port, "name:port" only on that port, and IP literals
// are allowed the same way. `localhost` and loopback IPs are always
// allowed. Entries that do not parse are left out (so they allow
// nothing) and reported in the error; the guard is usable either way.
func NewGuard(addr string, hosts []string) (*Guard, error) {
	g := &Guard{names: map[string]bool{}, pairs: map[string]bool{}}
	var errs []error
	if addr != "" {
		h, err := messages.ParseHost(addr)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("listen address %q: %w", addr, err))
		case h.Port == "":
			errs = append(errs, fmt.Errorf("listen address %q: no port", addr))
		case h.IP.IsValid() && h.IP.IsUnspecified():
			// Clients dial one of the machine's addresses; a rebinding
			// page can only present a name, never an IP literal.
			g.anyIPPort = h.Port
		default:
			g.pairs[h.Name+" "+h.Port] = true
		}
	}
	for _, s := range hosts {
		h, err := messages.ParseHost(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("allowed host %q: %w", s, err))
			continue
		}
		if h.Port == "" {
			g.names[h.Name] = true
		} else {
			g.pairs[h.Name+" "+h.Port] = true
		}
	}
	return g, errors.Join(errs...)
}

// HostAllowed reports whether a request for hostport (a Host header)
// may be answered.
func (g *Guard) HostAllowed(hostport string) bool {
	h, err := messages.ParseHost(hostport)
	if err != nil {
		return false
	}
	return g.allowed(h)
}

func (g *Guard) allowed(h messages.Host) bool {
	if h.IP.IsValid() {
		if h.IP.IsLoopback() || (g.anyIPPort != "" && h.Port == g.anyIPPort) {
			return true
		}
	} else if h.Name == "localhost" {
		return true
	}
	if g.names[h.Name] {
		return true
	}
	if h.Port == "" {
		// A browser leaves out the scheme's default port.
		return g.pairs[h.Name+" 80"] || g.pairs[h.Name+" 443"]
	}
	return g.pairs[h.Name+" "+h.Port]
}

// OriginAllowed reports whether origin (an Origin header: scheme, host and
// optional port, nothing else) is one of this API's own pages. "null" and
// anything that is not plain http or https are foreign.
func (g *Guard) OriginAllowed(origin string) bool {
	scheme, rest, ok := strings.Cut(origin, "://")
	if !ok {
		return false
	}
	if s := strings.ToLower(scheme); s != "http" && s != "https" {
		return false
	}
	if strings.ContainsAny(rest, "/?#@\\") {
		return false
	}
	h, err := messages.ParseHost(rest)
	if err != nil {
		return false
	}
	return g.allowed(h)
}

// Check applies the three rules to one request and returns the *Error to
// send when it is refused.
func (g *Guard) Check(ctx *fasthttp.RequestCtx) error {
	hdr := &ctx.Request.Header
	hostHdr := string(hdr.Host())
	if hostHdr == "" {
		return Errorf(fasthttp.StatusMisdirectedRequest, "request has no Host header")
	}
	if !g.HostAllowed(hostHdr) {
		return Errorf(fasthttp.StatusMisdirectedRequest,
			"host %q is not served here: use this API's address, localhost or a loopback IP", hostHdr)
	}
	// An absolute request line (GET http://host/ ...) names its own host,
	// which wins over the header in RFC 9112 §3.2.2; check it too.
	if uriHost := string(ctx.Host()); uriHost != "" && !strings.EqualFold(uriHost, hostHdr) && !g.HostAllowed(uriHost) {
		return Errorf(fasthttp.StatusMisdirectedRequest, "host %q is not served here", uriHost)
	}

	origin := string(hdr.Peek("Origin"))
	originOK := origin != "" && g.OriginAllowed(origin)
	if origin != "" && !originOK {
		return Errorf(fasthttp.StatusForbidden,
			"request from origin %q refused: this API answers only its own pages and clients that send no Origin (curl, scripts)", origin)
	}
	// The list allows every loopback IP and localhost on any port, for
	// the Host; as an Origin, one of them is another site unless it is
	// this request's own origin (host and port): another loopback IP
	// serves p2p domains' services from remote peers (127.77.x.y), and
	// another port on this one is another local program's pages. The
	// browser's Sec-Fetch-Site cannot tell: it is "same-site" across
	// ports, and absent on WebSocket handshakes. A name listed without a
	// port (the admin domain, answered in DNS with the admin address) is
	// the same: on another port it is another program of that machine.
	// A name listed with its port (a reverse proxy's) passes as listed.
	if originOK && g.otherSite(origin, hostHdr) {
		return Errorf(fasthttp.StatusForbidden,
			"request from origin %q refused: another site than %q", origin, hostHdr)
	}
	switch site := strings.ToLower(string(hdr.Peek("Sec-Fetch-Site"))); site {
	case "", "same-origin", "none":
	case "same-site":
		if !originOK {
			return Errorf(fasthttp.StatusForbidden, "request from another site refused (Sec-Fetch-Site: same-site without an allowed Origin)")
		}
	default: // cross-site, or a value this guard does not know
		return Errorf(fasthttp.StatusForbidden, "request from another site refused (Sec-Fetch-Site: %s)", site)
	}

	ct := string(hdr.ContentType())
	if ct == "" && len(ctx.Request.Body()) == 0 {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return nil
	}
	if ct == "" {
		ct = "none"
	}
	return Errorf(fasthttp.StatusUnsupportedMediaType,
		"request body must be JSON: send Content-Type: application/json (got %s), or no body and no Content-Type", ct)
}

// otherSite reports whether origin (already allowed) is allowed on any
// port, as a loopback IP, localhost or a name listed without a port, and
// is not the origin of a request for hostport (the Host header): another
// host, or another port (a port left out is the origin scheme's
// default). A loopback origin is held to this even when listed with its
// port; a name listed with the origin's port is not.
func (g *Guard) otherSite(origin, hostport string) bool {
	scheme, rest, _ := strings.Cut(origin, "://")
	o, err := messages.ParseHost(rest)
	if err != nil {
		return false
	}
	def := "80"
	if strings.EqualFold(scheme, "https") {
		def = "443"
	}
	port := func(p string) string {
		if p == "" {
			return def
		}
		return p
	}
	loopback := o.Name == "localhost" || o.IP.IsValid() && o.IP.IsLoopback()
	if !loopback && (!g.names[o.Name] || g.pairs[o.Name+" "+port(o.Port)]) {
		return false
	}
	h, err := messages.ParseHost(hostport)
	if err != nil {
		return true
	}
	return o.Name != h.Name || port(o.Port) != port(h.Port)
}

// guardKey is the user value under which Wrap stores the guard.
type guardKey struct{}

// Wrap serves next behind the guard: refused requests get the status and
// a plain-text message (logged at debug level, since any page can cause
// them); admitted ones reach next, which can find the guard with GuardOf.
// Every answer also tells browsers not to sniff types or frame the page.
func (g *Guard) Wrap(log *slog.Logger, next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if err := g.Check(ctx); err != nil {
			if log != nil {
				log.Debug("request refused", "method", string(ctx.Method()), "path", string(ctx.Path()),
					"host", string(ctx.Request.Header.Host()), "origin", string(ctx.Request.Header.Peek("Origin")), "err", err)
			}
			WriteError(ctx, nil, err)
		} else {
			ctx.SetUserValue(guardKey{}, g)
			next(ctx)
		}
		// Set last: a handler's error response resets the headers.
		ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
		ctx.Response.Header.Set("X-Frame-Options", "DENY")
	}
}

// GuardOf returns the guard that admitted ctx, or nil when the request did
// not pass through Wrap.
func GuardOf(ctx *fasthttp.RequestCtx) *Guard {
	g, _ := ctx.UserValue(guardKey{}).(*Guard)
	return g
}
