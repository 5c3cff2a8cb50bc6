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
// system trust store (see installCA).

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
		n, err := d.CA.RegenerateRoot()
		if err != nil {
			return httpx.Internal("new root: %v", err)
		}
		d.Log.Warn("new root CA: clients must trust the new root.pem", "reissued", n)
		hint()
		return httpx.OK(ctx)
	}))
	r.POST("/api/install-ca", httpx.Wrap(d.Log, func(ctx *fasthttp.RequestCtx) error {
		msg, err := installCA(d.CA.RootPath())
		if err != nil {
			return httpx.Internal("%v", err)
		}
		d.Log.Info("root CA installed", "how", msg)
		return httpx.OK(ctx)
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

// installCA puts the root certificate in the system trust store:
//
//   - PEERDNS_CA_TRUST_DIR set: copied there as peerdns-root.crt and
//     nothing else is run (tests, or a store managed by hand);
//   - Linux, Debian family: /usr/local/share/ca-certificates, then
//     update-ca-certificates; Fedora family: /etc/pki/ca-trust/source/
//     anchors, then update-ca-trust;
//   - macOS: security add-trusted-cert into the system keychain.
//
// Without the privileges it says which command to run.
func installCA(root string) (string, error) {
	b, err := os.ReadFile(root)
	if err != nil {
		return "", err
	}
	if dir := os.Getenv("PEERDNS_CA_TRUST_DIR"); dir != "" {
		dst := filepath.Join(dir, "peerdns-root.crt")
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return "", err
		}
		return "copied to " + dst, nil
	}
	switch runtime.GOOS {
	case "darwin":
		cmd := []string{"security", "add-trusted-cert", "-d", "-r", "trustRoot", "-k", "/Library/Keychains/System.keychain", root}
		if os.Geteuid() != 0 {
			return "", fmt.Errorf("installing the root CA needs root: run `sudo %s`", strings.Join(cmd, " "))
		}
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %v: %s", cmd[0], err, out)
		}
		return "added to the system keychain", nil
	case "linux":
		dir, update := "/usr/local/share/ca-certificates", "update-ca-certificates"
		if _, err := exec.LookPath(update); err != nil {
			if _, err := exec.LookPath("update-ca-trust"); err == nil {
				dir, update = "/etc/pki/ca-trust/source/anchors", "update-ca-trust"
			}
		}
		dst := filepath.Join(dir, "peerdns-root.crt")
		if os.Geteuid() != 0 {
			return "", fmt.Errorf("installing the root CA needs root: run `sudo cp %s %s && sudo %s`", root, dst, update)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return "", err
		}
		if out, err := exec.Command(update).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %v: %s", update, err, out)
		}
		return "copied to " + dst + " and " + update + " run", nil
	}
	return "", fmt.Errorf("installing the root CA is not supported on %s: trust %s by hand", runtime.GOOS, root)
}
