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
//   - Hints: each tab module (www/js/tabs) lists the update-* hints that
//     refresh it; a hint refreshes the visible tab at once (one refresh at
//     a time, one more if hints came meanwhile) and marks hidden tabs
//     stale, refreshed when shown. After a WebSocket reconnect every tab
//     is stale (hints may have been missed). system-reset waits until
//     GET /api/health?probe=readiness answers 200, then reloads, so the
//     page does not land on the 503 the node answers while it restarts.
//   - The socket reconnects with exponential backoff (0.5 s doubling to
//     30 s, ±20 % jitter); the status line counts down to the next try.
//   - Long lists (domains, entries, records, interfaces) are paged in the
//     page (25 to 200 rows, 50 by default) with a filter: only one page
//     of rows is ever in the DOM, so 10,000 domains stay responsive
//     (bench/panel measures it).
//   - Forms keep the browser's own checks for required fields, except
//     the subnets editor, where the API's messages are the point: they
//     are shown next to the subnet they name. Setting errors ("NAME:
//     ...") go next to their field. Every other API error is shown under
//     its form as the API wrote it.
//   - A settings refresh (update-settings) updates the form's values in
//     place, leaving alone the fields the user changed and has not saved
//     (and keeping focus); errors of the last save stay by their field.
//     The subnets editor is not redrawn while it has unsaved edits;
//     plugin cards only when a plugin changed.
//   - Strings a client, a peer or a plugin controls (domain names, record
//     names and data, tunnel and service names, manifest text, log
//     lines) go into the page as text only (ui.js h(): textContent and
//     setAttribute, never innerHTML), so markup in them is shown, not
//     parsed. Names and data wrap at any character (a 253-character
//     domain or a 300-character TXT record breaks over lines, as the
//     whole text is what a user reads and copies); hashes and keys, whose
//     shape is known, end in an ellipsis with the full text in the title.
//     No table is wider than its card.
//   - Log lines are shown as the log file has them, with the leading UTC
//     time in the user's locale, except bidirectional formatting
//     characters (U+061C, U+200E/F, U+202A-E, U+2066-9), shown as \uXXXX
//     as slog writes them: an override in a client's text (an access
//     line's Host) would otherwise show the rest of the line reversed.
//   - The certs tab's "download the root" uses GET /api/ca-root (added
//     in http/admin/certs.go; the spec has no endpoint for it): the root
//     certificate as a PEM attachment. Its key never leaves DATA/ca.
//     The tab also says what trusting the root allows and offers a new
//     root when the node serves names the root may not sign for (GET
//     /api/ca-status), and has "Uninstall root" (POST /api/uninstall-ca);
//     both are additions of http/admin/certs.go.
package panel
