package localdns

// The requests and replies of this actor are in messages/localdns.go;
// these are the private ones it sends itself.

// viewChanged carries what changed in the p2p view into the actor (from
// the view subscription, outside the actor's goroutine): the domains that
// now answer in DNS from the ledger and those that no longer do; first
// marks the first view of this incarnation (added is then every such
// domain).
type viewChanged struct {
	added, removed []string
	first          bool
}

// conflictChecked is the result of one public lookup.
type conflictChecked struct {
	domain   string
	publicIP string
	err      error
	round    uint64 // the actor's round when the lookup was started
	probe    bool   // the lookup probed a resolver taken as down (outage.go)
}

// retryCheck asks for one domain's public lookup again after a failure.
type retryCheck struct{ domain string }
