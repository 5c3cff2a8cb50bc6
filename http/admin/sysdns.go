package admin

// POST /api/install-dns and /api/uninstall-dns: point the OS resolver at
// the node for its suffixes (internal/sysdns), or take it back. The
// answer is the JSON sysdns.Result; a node that is not root gets a 500
// whose JSON says so and lists the exact commands to run
// ({"error": ..., "commands": [...]}), as install-ca does in plain text.

import (
	"errors"
	"log/slog"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peerdns/http/httpx"
	"peerdns/internal/sysdns"
)

// SysDNSDeps are what the resolver-integration routes need.
type SysDNSDeps struct {
	Addr  func() string   // the DNS server's bound address
	Names func() []string // claimed and internal domain names (sysdns.Routed picks the suffixes)
	Log   *slog.Logger
}

// RegisterSysDNS adds POST /api/install-dns and /api/uninstall-dns.
func RegisterSysDNS(r *router.Router, d SysDNSDeps) {
	do := func(install bool) fasthttp.RequestHandler {
		return httpx.Wrap(d.Log, func(ctx *fasthttp.RequestCtx) error {
			o := sysdns.Options{Addr: d.Addr(), Suffixes: sysdns.Routed(d.Names())}
			var res sysdns.Result
			var err error
			if install {
				res, err = sysdns.Install(o)
			} else {
				res, err = sysdns.Uninstall(o)
			}
			var nr *sysdns.NeedsRootError
			if errors.As(err, &nr) {
				return httpx.JSON(ctx, fasthttp.StatusInternalServerError, map[string]any{
					"error": nr.Action + " needs root: run the commands below (or `sudo peerdns " + nr.Action + "`)", "commands": nr.Commands})
			}
			if err != nil {
				return httpx.Internal("%v", err)
			}
			d.Log.Info("system resolver changed", "install", install, "layout", res.Layout, "dir", res.Dir, "written", res.Written, "removed", res.Removed)
			return httpx.JSON(ctx, fasthttp.StatusOK, res)
		})
	}
	r.POST("/api/install-dns", do(true))
	r.POST("/api/uninstall-dns", do(false))
}
