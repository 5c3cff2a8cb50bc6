package localdns

import (
	"errors"

	"peerdns/dns/records"
)

// The messages of this actor live beside it rather than in messages/
// because only this actor and http/admin/dns.go speak them; they can move
// there unchanged if a peer ever needs them.

// Sentinel errors that the admin API maps to 400.
var (
	ErrBadIndex   = errors.New("invalid index")
	ErrBadVersion = errors.New("invalid version: must be p2p or public")
)

// Conflict is a p2p domain that also resolves in public DNS.
type Conflict struct {
	Domain   string `json:"domain"`
	Version  string `json:"version"` // the preference in force: p2p (default) or public
	PublicIP string `json:"publicIP"`
}

// GetLocalDNS asks for the records (in index order) and the conflicts.
type GetLocalDNS struct{}

// GetLocalDNSReply answers GetLocalDNS.
type GetLocalDNSReply struct {
	Records   []records.Record
	Conflicts []Conflict
	Err       error
}

// AddRecord appends a validated record.
type AddRecord struct{ Record records.Record }

// UpdateRecord replaces the record at Index.
type UpdateRecord struct {
	Index  int
	Record records.Record
}

// DeleteRecord removes the record at Index; later records move up.
type DeleteRecord struct{ Index int }

// SetVersionPreference picks which answer wins for Domain.
type SetVersionPreference struct{ Domain, Version string }

// WriteReply answers AddRecord, UpdateRecord, DeleteRecord and
// SetVersionPreference. Err is nil once the change is persisted and
// published to the answer path.
type WriteReply struct{ Err error }

// GetSelectorCache asks for the version preferences.
type GetSelectorCache struct{}

// GetSelectorCacheReply answers GetSelectorCache: domain → p2p or public.
type GetSelectorCacheReply struct {
	Prefs map[string]string
	Err   error
}

// Recheck repeats the public lookup of every resolved p2p domain (sent
// by the actor's own ticker; tests send it to drive the clock).
type Recheck struct{}

// viewChanged carries a new p2p view into the actor (from the view
// subscription, outside the actor's goroutine).
type viewChanged struct{ names map[string]bool }

// conflictChecked is the result of one public lookup.
type conflictChecked struct {
	domain   string
	publicIP string
	err      error
}
