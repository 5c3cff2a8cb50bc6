// Package panel serves the node's browser admin panel: plain HTML, CSS
// and JavaScript modules embedded with embed.FS (www/), with no build
// step and nothing fetched from another origin.
//
// It owns the panel routes of spec/naming-node-admin-api.md ("Panel and
// navigation"): GET / (index.html), /styles.css, /admin.js and the other
// module files under /js/, GET /{tab} → 302 /#<tab> for the nine tabs, and
// /favicon.ico → 404 "Not Found". It never answers /api or /ws: the panel
// reads and writes the node only through the documented admin API and the
// /ws WebSocket, as any other client would.
//
// Decisions the spec leaves open:
//   - Caching: every file carries an ETag (a hash of its bytes, computed
//     once at start) and Cache-Control: no-cache, so a browser revalidates
//     and gets 304 until the binary changes. Module import paths are
//     written by hand (no build step), so they cannot carry a content hash;
//     revalidation is what keeps an upgraded node from serving a stale mix
//     of modules.
//   - Every panel answer carries a strict Content-Security-Policy (see
//     CSP): scripts, styles and connections only from the panel's own
//     origin, no inline script or style, no framing. The WebSocket is
//     allowed by connect-src 'self' (CSP level 3 matches ws/wss of the
//     same host).
//   - The certs tab's "download the root" uses GET /api/ca-root (added
//     in http/admin/certs.go; the spec has no endpoint for it): the root
//     certificate as a PEM attachment. Its key never leaves DATA/ca.
package panel
