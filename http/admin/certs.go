package admin

// Certificate routes over the node's CA (internal/certs).
//
// GET /api/certs lists the domains that have a certificate; GET
// /api/cert-details?domain= is its certificate as PEM (500 for an
// unknown domain or a missing parameter, as the spec gives no 404/400);
// generate-cert and regenerate-cert issue a new leaf (a new serial) with
// the domain's local IP in its names when it has one; delete-cert removes
// it (a later HTTPS handshake issues a new one); regenerate-ca makes a
// new root and re-issues every leaf; install-ca puts the root in the
// system trust store and the browsers' NSS stores and uninstall-ca takes
// it out again (catrust.go).
//
// Name constraints (internal/certs, scope.go): a root the node made
// carries them, so generate-cert and regenerate-cert for a name outside
// them answer 400 with the reason and issue nothing (the spec lists only
// 200 and 500; 400 is what a client can fix). GET /api/ca-status (not in
// the spec) says what the root may sign for, what the node serves that
// the root does not cover, and whether regenerate-ca is advised; the
// panel shows it. regenerate-ca answers "OK" and, on lines after it, the
// leaves dropped because the new root may not sign for them; when the new
// root is saved but a leaf cannot be issued again, it answers 500 saying
// the root is in place, and sends update-certs all the same.

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
	"peerdns/internal/certs"
	"peerdns/messages"
)

// CertDeps are what the certificate routes need.
type CertDeps struct {
	CA   *certs.CA
	IP   func(domain string) netip.Addr // the domain's local IP (invalid: none)
	Root *actor.RootContext             // for the update-certs hint
	Log  *slog.Logger
}

// RegisterCerts adds the certificate routes.
func RegisterCerts(r *router.Router, d CertDeps) {
	hint := func() { d.Root.ActorSystem().EventStream.Publish(&messages.Hint{Type: messages.HintCerts}) }
	r.GET("/api/certs", httpx.Wrap(d.Log, func(ctx *fasthttp.RequestCtx) error {
		list, err := d.CA.List()
		if err != nil {
			return httpx.Internal("certificates: %v", err)
		}
		names := make([]string, 0, len(list))
		for _, i := range list {
			names = append(names, i.Domain)
		}
		return httpx.JSON(ctx, 200, names)
	}))
	// Not in the spec: the panel's "download the root" (certs tab); the
	// root certificate is public, its key never leaves DATA/ca.
	r.GET("/api/ca-root", func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/x-pem-file")
		ctx.Response.Header.Set("Content-Disposition", `attachment; filename="peerdns-root.pem"`)
		ctx.SetBody(d.CA.RootPEM())
	})
	r.GET("/api/cert-details", httpx.Wrap(d.Log, func(ctx *fasthttp.RequestCtx) error {
		domain := strings.ToLower(string(ctx.QueryArgs().Peek("domain")))
		if domain == "" {
			return httpx.Internal("domain is required")
		}
		b, err := d.CA.PEM(domain)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return httpx.Internal("no certificate for %s", domain)
			}
			return httpx.Internal("%v", err)
		}
		ctx.SetContentType("application/x-pem-file")
		ctx.SetBody(b)
		return nil
	}))
	issue := func(ctx *fasthttp.RequestCtx) error {
		domain, err := domainBody(ctx)
		if err != nil {
			return err
		}
		if _, err := d.CA.Issue(domain, d.IP(domain)); err != nil {
			if errors.Is(err, certs.ErrOutsideScope) {
				return httpx.BadRequest("%v", err)
			}
			return httpx.Internal("%v", err)
		}
		d.Log.Info("certificate issued", "domain", domain)
		hint()
		return httpx.OK(ctx)
	}
	r.POST("/api/generate-cert", httpx.Wrap(d.Log, issue))
	r.POST("/api/regenerate-cert", httpx.Wrap(d.Log, issue))
	r.POST("/api/delete-cert", httpx.Wrap(d.Log, func(ctx *fasthttp.RequestCtx) error {
		domain, err := domainBody(ctx)
		if err != nil {
			return err
		}
		ok, err := d.CA.Delete(domain)
		if err != nil {
			return httpx.Internal("%v", err)
		}
		if !ok {
			return httpx.Internal("no certificate for %s", domain)
		}
		hint()
		return httpx.OK(ctx)
	}))
	r.POST("/api/regenerate-ca", httpx.Wrap(d.Log, func(ctx *fasthttp.RequestCtx) error {
		old := d.CA.Root()
		n, dropped, err := d.CA.RegenerateRoot()
		if err != nil && d.CA.Root() == old {
			return httpx.Internal("new root: %v", err)
		}
		if err != nil {
			// The new root is saved and in use; only re-issuing the
			// leaves stopped. Clients must hear the root changed, and
			// the leaves not issued are issued at their next handshake
			// (a leaf of the old root is not fresh).
			hint()
			return httpx.Internal("the new root is in place (install-ca to trust it), but re-issuing the leaves stopped after %d: %v; "+
				"the others are issued again at their next HTTPS handshake", n, err)
		}
		d.Log.Warn("new root CA: clients must trust the new root.pem (install-ca)", "reissued", n,
			"dropped", strings.Join(dropped, ","), "scope", certs.RootScope(d.CA.Root()).String())
		hint()
		lines := []string{}
		for _, x := range dropped {
			lines = append(lines, "dropped "+x+": the new root may not sign for it")
		}
		return okLines(ctx, lines)
	}))
	r.GET("/api/ca-status", httpx.Wrap(d.Log, func(ctx *fasthttp.RequestCtx) error {
		return httpx.JSON(ctx, 200, caStatus(d.CA))
	}))
	r.POST("/api/install-ca", httpx.Wrap(d.Log, func(ctx *fasthttp.RequestCtx) error {
		lines, err := installCA(d.CA.RootPath())
		for _, l := range lines {
			d.Log.Info("root CA installed", "where", l)
		}
		if err != nil {
			return httpx.Internal("%v", errLines(err, lines))
		}
		return okLines(ctx, lines)
	}))
	r.POST("/api/uninstall-ca", httpx.Wrap(d.Log, func(ctx *fasthttp.RequestCtx) error {
		lines, err := uninstallCA()
		for _, l := range lines {
			d.Log.Info("root CA uninstalled", "where", l)
		}
		if err != nil {
			return httpx.Internal("%v", errLines(err, lines))
		}
		return okLines(ctx, lines)
	}))
}

func domainBody(ctx *fasthttp.RequestCtx) (string, error) {
	var req struct {
		Domain string `json:"domain"`
	}
	if err := httpx.DecodeJSON(ctx, &req, 500); err != nil {
		return "", err
	}
	d := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(req.Domain)), ".")
	if !certs.ValidDomain(d) {
		return "", httpx.Internal("domain %q is not a domain name", req.Domain)
	}
	return d, nil
}

// okLines answers "OK", then each line.
func okLines(ctx *fasthttp.RequestCtx, lines []string) error {
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBodyString(strings.Join(append([]string{"OK"}, lines...), "\n"))
	return nil
}

// errLines is err followed by what was done before it.
func errLines(err error, done []string) error {
	if len(done) == 0 {
		return err
	}
	return fmt.Errorf("%v\ndone before that:\n%s", err, strings.Join(done, "\n"))
}

// CAStatus is GET /api/ca-status.
type CAStatus struct {
	// Constrained: the root carries name constraints. A root made before
	// the node had them signs for any name; regenerate-ca replaces it.
	Constrained bool `json:"constrained"`
	// Permitted is what the root may sign for (DNS suffixes, then IP
	// ranges); empty when not constrained.
	Permitted certsScope `json:"permitted"`
	// Serves is what the node serves now.
	Serves certsScope `json:"serves"`
	// Missing is what the node serves that the root does not cover.
	Missing certsScope `json:"missing"`
	// RegenerateAdvised: the root is unconstrained, or misses a suffix or
	// range; Advice says why and what to do.
	RegenerateAdvised bool   `json:"regenerateAdvised"`
	Advice            string `json:"advice,omitempty"`
	// Allows says in words what trusting the root allows.
	Allows string `json:"allows"`
}

type certsScope struct {
	DNS []string `json:"dns"`
	IP  []string `json:"ip"`
}

func scopeJSON(s certs.Scope) certsScope {
	out := certsScope{DNS: append([]string{}, s.Suffixes...), IP: []string{}}
	for _, p := range s.Ranges {
		out.IP = append(out.IP, p.String())
	}
	return out
}

func caStatus(ca *certs.CA) CAStatus {
	root := ca.Root()
	serves := ca.Scope()
	st := CAStatus{Constrained: certs.Constrained(root), Serves: scopeJSON(serves)}
	if !st.Constrained {
		st.Permitted, st.Missing = scopeJSON(certs.Scope{}), scopeJSON(certs.Scope{})
		st.RegenerateAdvised = true
		st.Advice = "this root has no name constraints: a browser that trusts it accepts it for any site, so whoever holds " +
			"DATA/ca/root-key.pem can intercept them all; regenerate-ca makes a root limited to " + serves.String() +
			" (then install-ca again)"
		st.Allows = "any name: every HTTPS site"
		return st
	}
	permitted := certs.RootScope(root)
	missing := certs.Missing(root, serves)
	st.Permitted, st.Missing = scopeJSON(permitted), scopeJSON(missing)
	if !missing.Empty() {
		st.RegenerateAdvised = true
		st.Advice = "the node now serves " + missing.String() + ", which the root may not sign for: regenerate-ca makes a root " +
			"that covers it (then install-ca again, so browsers trust the new root)"
	}
	st.Allows = "only names under " + strings.Join(permitted.Suffixes, ", ")
	if len(permitted.Ranges) > 0 {
		st.Allows += " and addresses in " + scopeJSON(permitted).IPString()
	}
	st.Allows += "; browsers refuse a certificate for any other name signed with this root, even one made with its stolen key"
	return st
}

// IPString is the IP ranges joined by commas.
func (s certsScope) IPString() string { return strings.Join(s.IP, ", ") }
