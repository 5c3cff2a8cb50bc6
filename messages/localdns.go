package messages

import (
	"errors"
)

// The local DNS family: requests to the actor that owns the node's local
// DNS records, the version preferences (selector cache) and the DNS
// conflicts (actors/localdns), as the admin API sends them. A record is a
// validated LocalRecord; its JSON shape is the spec's Local DNS record.

// Sentinel errors of the local DNS writes; the admin API maps them to 400.
var (
	ErrBadRecordIndex       = errors.New("invalid index")
	ErrBadVersionPreference = errors.New("invalid version: must be p2p or public")
)

// DNSConflict is a p2p domain that also resolves in public DNS (an item of
// the conflicts array of GET /api/local-dns).
type DNSConflict struct {
	Domain   string `json:"domain"`
	Version  string `json:"version"` // the preference in force: p2p (default) or public
	PublicIP string `json:"publicIP"`
}

// GetLocalDNS asks for the records (in index order) and the conflicts.
type GetLocalDNS struct{}

// GetLocalDNSReply answers GetLocalDNS.
type GetLocalDNSReply struct {
	Records   []LocalRecord
	Conflicts []DNSConflict
	Err       error
}

// AddLocalRecord appends a validated record.
type AddLocalRecord struct{ Record LocalRecord }

// UpdateLocalRecord replaces the record at Index.
type UpdateLocalRecord struct {
	Index  int
	Record LocalRecord
}

// DeleteLocalRecord removes the record at Index; later records move up.
type DeleteLocalRecord struct{ Index int }

// SetVersionPreference picks which answer wins for Domain: p2p or public.
type SetVersionPreference struct{ Domain, Version string }

// LocalDNSWriteReply answers AddLocalRecord, UpdateLocalRecord,
// DeleteLocalRecord and SetVersionPreference. Err is nil once the change
// is persisted and published to the answer path (the DNS server answers
// with it from then on); ErrBadRecordIndex and ErrBadVersionPreference
// mark the caller's mistakes.
type LocalDNSWriteReply struct{ Err error }

// GetSelectorCache asks for the version preferences.
type GetSelectorCache struct{}

// GetSelectorCacheReply answers GetSelectorCache: domain → p2p or public.
type GetSelectorCacheReply struct {
	Prefs map[string]string
	Err   error
}

// RecheckDNSConflicts repeats the public lookup of every resolved p2p
// domain (the localdns actor's own ticker sends it; tests send it to
// drive the clock). It has no reply.
type RecheckDNSConflicts struct{}
