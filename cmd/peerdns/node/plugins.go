package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/fasthttp/router"

	"peerdns/actors/plugin"
	"peerdns/http/admin"
	"peerdns/http/pluginweb"
	"peerdns/internal/token"
	"peerdns/messages"
	"peerdns/transport"
)

// startPlugins spawns the plugins supervisor over DATA/plugins with the
// built-in profile plugin, after the ledger (plugin domains are internal
// domains).
func (n *Node) startPlugins() error {
	n.pluginTable = &plugin.Table{}
	n.peerCalls = plugin.NewPeerCalls(n.mux.For(transport.StreamPlugin), n.pluginTable, 0)
	pid, err := n.root.Spawn("plugins", plugin.Props(plugin.Deps{
		Peers: n.peerCalls,
		Dir:   filepath.Join(n.orig.Data, "plugins"), DataDir: filepath.Join(n.orig.Data, "plugin-data"),
		Store: n.nodeDB, Ledger: n.ledger, Address: n.edgeAnswer(), PeerID: n.id.ID(),
		Static: []plugin.Static{n.profilePlugin()}, Log: n.logs["plugins"], Table: n.pluginTable,
		Events: func(h *messages.Hint) { n.root.System.EventStream.Publish(h) },
	}))
	if err != nil {
		return err
	}
	n.plugins = pid
	// Stop the handlers before the ledger and the stores go.
	n.closers = append(n.closers, func() { _ = n.root.System.Root.StopFuture(pid).Wait() })
	// The node serves once the first scan is done (an answer comes after
	// Started, which scans): the profile site and the folders' plugins
	// are in the table from the first request on, so a request to the
	// profile domain right after the start finds its site (not a 404),
	// and INTERNAL_DOMAINS lists it.
	if _, err := n.root.System.Root.RequestFuture(pid, &messages.GetPlugins{}, pluginScanWait).Result(); err != nil {
		return fmt.Errorf("first plugin scan: %w", err)
	}
	n.pluginWeb = &pluginweb.Server{Self: n.id.ID()}
	return nil
}

// pluginScanWait bounds the wait for the plugins' first scan: a read
// of the plugins folder and the start of each handler's actor.
const pluginScanWait = 30 * time.Second

// edgeAnswer is the address DNS gives plugin domains: the edge proxy's
// HTTP listener (loopback when it listens on every address).
func (n *Node) edgeAnswer() netip.Addr {
	host, _, err := net.SplitHostPort(n.cfg.HTTPAddr)
	if err != nil {
		return answerAddr(&net.TCPAddr{})
	}
	return answerAddr(&net.TCPAddr{IP: net.ParseIP(host)})
}

// profilePlugin is the built-in plugin on PROFILE_DOMAIN: GET /api/token
// gives a write token of this node (internal/token), valid for
// TOKEN_LIFETIME.
func (n *Node) profilePlugin() plugin.Static {
	return plugin.Static{
		Manifest: plugin.Manifest{Name: "profile", Version: n.orig.Version, Domain: strings.ToLower(n.cfg.ProfileDomain),
			Description: "This node's profile: write tokens for plugin domains (GET /api/token)."},
		Handle: func(_ context.Context, req *plugin.HandleRequest) (*plugin.HandleResponse, error) {
			if req.Path != "/api/token" || (req.Method != "GET" && req.Method != "HEAD") {
				return &plugin.HandleResponse{Status: 404, Headers: map[string]string{"Content-Type": "text/plain"}, Body: []byte("Not Found\n")}, nil
			}
			tok, t := token.Issue(n.id, time.Now(), time.Duration(n.tokenLifetime.Load()))
			return &plugin.HandleResponse{Status: 200, Headers: map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"},
				Body: pluginweb.TokenJSON(tok, t)}, nil
		},
	}
}

// pluginRoutes registers the plugin routes on the admin router.
func (n *Node) pluginRoutes(r *router.Router) {
	admin.RegisterPlugins(r, n.logs["core"], n.root.System.Root, n.plugins, pluginSites{n.pluginTable})
}

// pluginSites hands the plugin table to the http packages as the
// pluginweb.Sites they declare.
type pluginSites struct{ t *plugin.Table }

func (p pluginSites) Site(domain string) pluginweb.Site {
	if rt := p.t.Lookup(domain); rt != nil {
		return rt
	}
	return nil // a nil *Runtime in the interface would not compare nil
}
