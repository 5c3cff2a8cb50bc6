// Package cli is the part of the peerdns command that speaks to a running
// node through its admin API: `peerdns status`, `domains`, `records`,
// `peers`, `tunnels`, `logs` and `metrics`. It only reads and writes the
// admin API's documented endpoints (spec/naming-node-admin-api.md), the
// WebSocket for `logs -f`, and /metrics; it holds no state of its own.
//
// Every command takes --admin-addr (default PEERDNS_ADMIN_ADDR, else
// 127.0.0.1:7710), --json and --timeout, anywhere on the line. Without
// --json the output is a table, key/value lines, log lines or the
// exposition text, for a terminal (their layout may change between
// versions; a character of the node's data that does not print, such as
// a tab or line break in a TXT record or an escape sequence in a log
// line, shows as its Go escape: \t, \x1b); with --json it is the admin API's
// own JSON (or, where a command joins several endpoints, an object of
// them), one document per command, and for `logs -f` one JSON object per
// line: that is the form for scripts.
//
// Exit codes, for scripts:
//
//	0  done
//	1  the node could not be asked: nothing listens at the address, the
//	   connection failed or timed out, or what answers is not a peerdns
//	   admin API (one line on stderr); `logs -f` pings the node and
//	   gives up on one that answers nothing for --timeout
//	2  usage error (unknown command, flag or missing argument)
//	3  the node answered and refused the request (its message on stderr):
//	   a 4xx or 5xx, e.g. removing a domain this node does not own
//	4  what the command names does not exist: `domains show` of a domain
//	   with no claim, `records remove` of a name with no record
//	130  interrupted (SIGINT or SIGTERM) before the node answered; a
//	   change asked for may or may not have been made. `logs -f`, which
//	   runs until interrupted, exits 0 then
package cli
