package records

import "peerdns/internal/view"

// Version preferences for a p2p domain that also resolves publicly.
const (
	VersionP2P    = "p2p"
	VersionPublic = "public"
)

// Snapshot is the local DNS state the answer path needs, published by the
// localdns actor. Never modified after publish.
type Snapshot struct {
	Version uint64
	Records []Record          // in index order
	Prefs   map[string]string // domain → VersionP2P or VersionPublic
}

// Published hands the current Snapshot to readers and tells subscribers,
// each in its own goroutine, about newer ones (view.Publisher).
type Published = view.Publisher[Snapshot]
