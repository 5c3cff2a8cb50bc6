// Package logs answers the agent's /api/vN/logs: the systemd journal
// (through journalctl), the anomaly detector's events and the agent's own
// audit trail, filtered by q, since/until, priority and unit and paged by
// an opaque cursor.
//
// It owns the audit trail (Audit) and the in-memory event ring (Ring)
// that the anomaly detector can publish through. It never runs a shell,
// never passes a request's text to journalctl except as one argument of
// a fixed option (--unit=, --after-cursor=), and never reads more than
// MaxScan journal entries for one page.
//
// # Decisions
//
// Paging. Pages are newest first. A cursor names the oldest entry of the
// page just shown (the ring sequence for audit and anomaly, journald's own
// cursor for the journal), and the next page starts strictly before it, so
// entries that arrive between requests never shift or repeat a page; they
// appear on a new first page. Cursors are base64url of "source:value"; one
// that does not decode, or belongs to another source, is a 400.
//
// Audit trail. Persisted: JSON lines in <data>/audit.log (0600), each
// entry synced before it counts, the newest 10,000 kept (the file is
// rewritten with those when it doubles), each entry's texts cut to a few
// KiB (they carry callers' words: an unknown peer's rpc method). An audit
// trail that a restart wipes is no trail. Agents without a data dir keep it in memory.
//
// Anomaly events. Any Source; a nil one answers 503 "no anomaly detector
// running". The detector can publish through NewRing.
//
// Journal. journalctl -o json -r with the time window (--since/--until
// @unix), --priority and --unit done by journalctl; q is matched here
// (case-insensitive substring of message, unit and severity), reading at
// most MaxScan (50,000) entries per page: a page that stops there says
// truncated and its cursor continues the search. AGENT_JOURNAL=0 turns
// the source off (503 saying so); a machine without journalctl or journal
// files gets a 503 that says which. journalctl shows an unprivileged agent
// only its own user's entries unless the agent's user is in the
// systemd-journal (or adm) group; that is the system's access rule, kept.
// --output-fields needs systemd 236 or later (2017).
//
// Times. since/until take unix seconds or milliseconds (above 1e11),
// ISO 8601 (RFC 3339, "2006-01-02T15:04:05" and "2006-01-02 15:04:05" as
// UTC, or a date), relative "-90s", "-30m", "-1h", "-2d", "-1w" or a
// negative number of seconds, and "now".
package logs
